package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/portico-dev/portico/internal/proxysync"
)

// proxyTypes are the columns of the proxy-status table, in order.
var proxyTypes = []string{"LDS", "RDS", "VHDS", "CDS", "EDS", "SDS"}

// proxyRow is one proxy of `portico proxy-status -o json`.
type proxyRow struct {
	Proxy   string `json:"proxy"`
	Gateway string `json:"gateway"`
	Replica string `json:"replica"`
	Stream  string `json:"stream"`
	// Connected is when the stream opened, on its replica's clock.
	Connected time.Time            `json:"connected"`
	Types     map[string]typeState `json:"types"`
}

type typeState struct {
	State string `json:"state"`
	// Age is how long it has waited (PENDING, STALE) or since the NACK.
	Age     string          `json:"age,omitempty"`
	Sent    string          `json:"sent,omitempty"`
	Acked   string          `json:"acked,omitempty"`
	Error   string          `json:"error,omitempty"`
	Unacked *proxysync.Diff `json:"unacked,omitempty"`
}

// proxyStatusCmd: portico proxy-status [PROXY]. It reads the report of
// the debug server at --debug-address (standalone's, or one replica's
// through a port-forward) and prints every proxy with the state of each
// type; with PROXY, that proxy's sent and ACKed versions per type and the
// resources sent and not ACKed.
func proxyStatusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("proxy-status", "proxy-status [--debug-address 127.0.0.1:19001 | --cluster [--kubeconfig FILE] [-n NS] [--selector SEL] [--connect port-forward|pod-ip]] [-o table|json] [--stale-after 10s] [PROXY]", stderr)
	addr := fs.String("debug-address", defaultDebugAddress, "`address` (host:port or URL) of the debug server to ask: standalone's --debug-address")
	fs.StringVar(addr, "admin-address", defaultDebugAddress, "the same as --debug-address")
	output := fs.String("o", "table", "output `format`: table or json")
	staleAfter := fs.Duration("stale-after", proxysync.DefaultStaleAfter, "how long a response may wait for its ACK before it counts as STALE")
	cluster := fs.Bool("cluster", false, "ask every replica of the controller in the cluster (found with --namespace and --selector) instead of --debug-address")
	var co clusterOptions
	fs.StringVar(&co.kubeconfig, "kubeconfig", "", "with --cluster: `path` of a kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&co.namespace, "namespace", "portico-system", "with --cluster: the controller's `namespace`")
	fs.StringVar(&co.namespace, "n", "portico-system", "the same as --namespace")
	fs.StringVar(&co.selector, "selector", "app.kubernetes.io/name=portico", "with --cluster: label `selector` of the controller's Pods")
	fs.StringVar(&co.connect, "connect", "port-forward", "with --cluster: how to reach a Pod: port-forward (through the API server) or pod-ip (from inside the cluster network)")
	fs.IntVar(&co.debugPort, "debug-port", 19001, "with --cluster: the debug `port` of a Pod without a container port named debug")
	if code, ok := parseFlagsArgs(fs, args, 1, stderr); !ok {
		return code
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "portico proxy-status: -o must be table or json, not %q\n", *output)
		return exitUsage
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	q := url.Values{}
	proxy := fs.Arg(0)
	if proxy != "" {
		q.Set("node", proxy)
	}
	var rows []proxyRow
	if *cluster {
		reports, errs, err := clusterReports(ctx, co, q)
		if err != nil {
			fmt.Fprintf(stderr, "portico proxy-status: %v\n", err)
			return exitError
		}
		for _, err := range errs {
			fmt.Fprintf(stderr, "portico proxy-status: %v\n", err)
		}
		if len(reports) == 0 {
			return exitError
		}
		rows = clusterRows(reports, *staleAfter, proxy != "")
		if proxy != "" && len(rows) == 0 {
			fmt.Fprintf(stderr, "portico proxy-status: no proxy %q is connected to any of the %d replicas reached\n", proxy, len(reports))
			return exitError
		}
	} else {
		rep, err := fetchReport(ctx, strings.TrimSuffix(base, "/")+"/debug/proxies?"+q.Encode())
		if err != nil {
			fmt.Fprintf(stderr, "portico proxy-status: %v\n", err)
			return exitError
		}
		if proxy != "" && len(rep.Proxies) == 0 {
			fmt.Fprintf(stderr, "portico proxy-status: no proxy %q is connected to %s\n", proxy, rep.Replica)
			return exitError
		}
		rows = proxyRows(rep, *staleAfter, proxy != "")
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return exitError
		}
		return exitOK
	}
	if proxy != "" {
		printProxyDetail(stdout, rows)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tGATEWAY\tREPLICA\t"+strings.Join(proxyTypes, "\t"))
	for _, r := range rows {
		cells := []string{r.Proxy, r.Gateway, r.Replica}
		for _, t := range proxyTypes {
			cells = append(cells, r.Types[t].cell())
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	return exitOK
}

func fetchReport(ctx context.Context, u string) (proxysync.Report, error) {
	return fetchReportWith(ctx, http.DefaultClient, u)
}

func fetchReportWith(ctx context.Context, client *http.Client, u string) (proxysync.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return proxysync.Report{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return proxysync.Report{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return proxysync.Report{}, fmt.Errorf("%s: %s %s", u, resp.Status, strings.TrimSpace(string(msg)))
	}
	var rep proxysync.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return proxysync.Report{}, fmt.Errorf("%s: decoding: %w", u, err)
	}
	rep.Received = time.Now()
	return rep, nil
}

// proxyRows are the rows of rep; detail keeps the resources not ACKed.
func proxyRows(rep proxysync.Report, staleAfter time.Duration, detail bool) []proxyRow {
	now := rep.Time.Add(time.Since(rep.Received)) // on the replica's clock
	rows := make([]proxyRow, 0, len(rep.Proxies))
	for _, p := range rep.Proxies {
		r := proxyRow{Proxy: p.NodeID, Gateway: p.Gateway, Replica: p.Replica, Stream: p.Stream, Connected: p.Connected, Types: map[string]typeState{}}
		for i := range p.Types {
			t := &p.Types[i]
			state, age := t.State(now, staleAfter)
			ts := typeState{State: state}
			if state != proxysync.StateSynced {
				ts.Age = age.Round(time.Second).String()
			}
			if t.Sent != nil {
				ts.Sent = t.Sent.Version
			}
			if t.Acked != nil {
				ts.Acked = t.Acked.Version
			}
			if t.Nack != nil {
				ts.Error = t.Nack.Error
			}
			if detail {
				ts.Unacked = t.Unacked
			}
			r.Types[proxysync.ShortType(t.TypeURL)] = ts
		}
		rows = append(rows, r)
	}
	return rows
}

// cell is the table cell of a type's state.
func (t typeState) cell() string {
	switch t.State {
	case "":
		return "-"
	case proxysync.StateSynced:
		return t.State
	case proxysync.StateNack:
		msg := t.Error
		if len(msg) > 60 {
			msg = msg[:57] + "..."
		}
		return fmt.Sprintf("NACK (%s)", msg)
	}
	return fmt.Sprintf("%s %s", t.State, t.Age)
}

// printProxyDetail prints, per type, what was sent and what ACKed, and
// the resources sent and not ACKed.
func printProxyDetail(w io.Writer, rows []proxyRow) {
	for _, r := range rows {
		fmt.Fprintf(w, "Proxy %s of %s on %s (%s)\n", r.Proxy, r.Gateway, r.Replica, r.Stream)
		types := make([]string, 0, len(r.Types))
		for t := range r.Types {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, name := range types {
			t := r.Types[name]
			fmt.Fprintf(w, "  %s %s\n    sent  %s\n    acked %s\n", name, t.cell(), orNone(t.Sent), orNone(t.Acked))
			if t.Error != "" {
				fmt.Fprintf(w, "    error %s\n", t.Error)
			}
			if d := t.Unacked; d != nil {
				for _, res := range d.Resources {
					fmt.Fprintf(w, "    + %s %s\n", res.Name, res.Version)
				}
				for _, name := range d.Removed {
					fmt.Fprintf(w, "    - %s\n", name)
				}
				if d.Omitted > 0 {
					fmt.Fprintf(w, "    … and %d more\n", d.Omitted)
				}
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
