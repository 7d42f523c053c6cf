// Package slurm is the Slurm engine of a fleet: it drives the cluster
// through its command-line clients only (sbatch --parsable, squeue
// --json, scancel, scontrol show config), never slurmrestd, which is
// often switched off and whose schema changes with every release. The
// JSON it reads from squeue is decoded leniently across Slurm's data
// parser versions (22.05's plain numbers and strings, 23.02 and later's
// {"set","number"} objects and state lists).
package slurm
