package testenv

import (
	"context"
	"os"
	"os/exec"
	"runtime"
)

// GoCommand is `go args...` run with the toolchain that built the calling
// binary. go.mod needs Go 1.27, which a machine's own go (1.26) reaches
// only through GOTOOLCHAIN; the Makefile exports it, and this makes a test
// or tool started any other way build with the same toolchain.
func GoCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+runtime.Version())
	return cmd
}
