// Command portico is the Portico Gateway API controller for Envoy.
//
//	portico translate -f FILE|DIR [-f …] [--output all|status|xds] [-o json|yaml]
//	portico standalone --resources DIR [--xds-address 127.0.0.1:18000] [--admin-address :19000] [--debug-address 127.0.0.1:19001]
//	portico bootstrap --gateway NS/NAME [--xds-address 127.0.0.1:18000] [--xds-ca FILE …] [--admin-address 127.0.0.1:9901]
//	portico certs --dir DIR --gateway NS/NAME [--server-name 127.0.0.1]
//	portico controller [--kubeconfig FILE] [--namespace NS] [flags]
//	portico proxy-status [--debug-address 127.0.0.1:19001] [-o table|json] [PROXY]
//	portico status [GATEWAY] [-f DIR | --kubeconfig FILE] [-n NS | -A] [--route KIND/NS/NAME] [-o table|json]
//	portico proxy-agent [--admin-address 127.0.0.1:19001] [--listen :19003] [--drain-timeout 60s] [--min-drain-duration 5s]
//	portico version
//
// Every subcommand parses its flags with the standard flag package, so both
// -flag and --flag are accepted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Leader-election defaults of the controller command.
const (
	defaultLease = 15 * time.Second
	defaultRenew = 10 * time.Second
	defaultRetry = 2 * time.Second
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (bad input files, server error…)
	exitUsage = 2 // bad command line
)

// run runs the command line args (without the program name) and returns
// the exit code. standalone stops on SIGINT or SIGTERM.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context whose cancellation stops long-running
// subcommands as a signal would.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "translate":
		return translateCmd(args[1:], stdout, stderr)
	case "bootstrap":
		return bootstrapCmd(args[1:], stdout, stderr)
	case "certs":
		return certsCmd(args[1:], stdout, stderr)
	case "standalone":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return standaloneCmd(ctx, args[1:], stdout, stderr)
	case "controller":
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return controllerCmd(ctx, args[1:], stdout, stderr)
	case "proxy-status":
		return proxyStatusCmd(ctx, args[1:], stdout, stderr)
	case "proxy-agent":
		return proxyAgentCmd(ctx, args[1:], stdout, stderr)
	case "status":
		return statusCmd(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "portico: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: portico <command> [flags]

Commands:
  translate    translate Gateway API manifests into statuses and Envoy xDS resources
  standalone   serve xDS to Envoy from a directory of manifests, reloading on change
  bootstrap    print the bootstrap of an Envoy that gets its configuration from standalone
  certs        write a local CA and the certificates of mutual TLS between standalone and Envoys
  controller   run against a Kubernetes cluster (leader-elected status writing, xDS on every replica)
  proxy-status what every proxy connected to a debug server accepted, per resource type
  proxy-agent  the shutdown manager beside each provisioned Envoy (drains it on SIGTERM)
  status       the tree Gateway → listeners → routes → backends with their conditions, from the cluster or -f files
  version      print the version

Run "portico <command> -h" for the flags of a command.
`)
}
