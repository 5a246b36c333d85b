#!/bin/bash
# Grade a class on Slurm: one array task per shard (grade.sbatch), then one merge once they have
# all ended (afterany: a shard that exits 3 still wrote every report it could).
#   bash submit.sh SUBMISSIONS OUT ROSTER [sbatch options for the shards, e.g. --array=1-16]
# ROSTER is the class list exported from the LMS, or "" for none. Prints the merge's job id;
# the class's gradebook, summary and reports are then in OUT/all.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
submissions=$(realpath "$1") out=$(realpath -m "$2") roster=${3:+$(realpath "$3")}
shift 3
mkdir -p logs "$out"
shards=$(sbatch --parsable "$@" "$here/grade.sbatch" "$submissions" "$out" "$roster")
sbatch --parsable --dependency="afterany:${shards%%;*}" --job-name=merge-l14 --output=logs/merge-%j.log \
    --wrap "grader merge $(printf '%q' "$out")/shard-* -o $(printf '%q' "$out/all")"
