//go:build unix

package load

import "syscall"

// openFlags makes opening a FIFO or device return at once instead of
// waiting for a writer (the file is then refused: not a regular file).
const openFlags = syscall.O_NONBLOCK
