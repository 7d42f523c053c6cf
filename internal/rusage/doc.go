// Package rusage runs a command as a child process and reports what it
// cost: its exit status, wall time, CPU time (user + system) and peak
// resident set size, from the kernel's accounting of the child
// (getrusage via os.ProcessState). The benchmarks and the adversarial
// campaign under bench/ use it to hold gpuattest to its resource goals.
//
// A child's ru_maxrss is the largest of the child and the descendants it
// waited for, so a step's processes count toward `gpuattest run`. A child
// also inherits the peak of the process that started it when it is
// forked from a large process; start measured children from a small one.
package rusage
