// Package regfile reads files that users and strangers name on a command
// line: only regular files, opened so that a FIFO or a device never
// blocks the open, read up to a size limit, with the context checked
// between chunks so that an interrupt stops a long read or hash.
package regfile
