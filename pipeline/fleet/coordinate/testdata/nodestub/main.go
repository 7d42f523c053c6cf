// Command nodestub stands in for a node's gpuattest of another
// architecture in the staging tests: an ELF executable of that machine,
// which the tests never run.
package main

func main() {}
