//go:build !unix

package load

// openFlags: without O_NONBLOCK, only directory entries that are not
// regular files are refused before they are opened.
const openFlags = 0
