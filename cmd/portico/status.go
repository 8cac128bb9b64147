package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/statustree"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// statusTimeout bounds the reads of the cluster.
const statusTimeout = 30 * time.Second

const statusSynopsis = "status [GATEWAY] [-f FILE|DIR …] [--kubeconfig FILE] [-n NS | -A] [--route KIND/NS/NAME] [-o table|json] [--controller-name NAME]"

// statusCmd: portico status [GATEWAY]. It prints every Gateway of
// Portico's classes as a tree — listeners, the routes attached to each,
// their backends — with the conditions of each (package statustree).
// With -f, the objects are the files and the statuses those a translation
// computes, as standalone serves them; otherwise the objects and their
// live status are read from the cluster of the kubeconfig (--kubeconfig,
// $KUBECONFIG, ~/.kube/config, or in-cluster).
//
// GATEWAY is NS/NAME, or NAME in the namespace of -n (default: the
// kubeconfig context's, "default" with -f). Without GATEWAY the Gateways
// of that namespace are shown, of every namespace with -A; with --route,
// every Gateway the route names (the route's namespace, when it is
// KIND/NAME, is -n's).
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", statusSynopsis, stderr)
	var files stringList
	fs.Var(&files, "f", "manifest `file or directory` to translate instead of reading a cluster (as portico translate -f); repeatable")
	kubeconfig := fs.String("kubeconfig", "", "`path` of a kubeconfig; empty: $KUBECONFIG, ~/.kube/config, then the in-cluster config")
	var namespace string
	fs.StringVar(&namespace, "n", "", "`namespace` of the Gateways (and of GATEWAY and --route given without one); default: the kubeconfig context's, \"default\" with -f")
	fs.StringVar(&namespace, "namespace", "", "the same as -n")
	var all bool
	fs.BoolVar(&all, "A", false, "the Gateways of every namespace")
	fs.BoolVar(&all, "all-namespaces", false, "the same as -A")
	route := fs.String("route", "", "show only the path to one route: `KIND/NS/NAME` (or KIND/NAME in -n's namespace), KIND one of HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute")
	format := &choice{value: "table", allowed: []string{"table", "json"}}
	fs.Var(format, "o", "output format: table (an indented tree) or json")
	controller := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName of Portico")
	budgets := addBudgetFlags(fs)
	lf := addLoadFlags(fs)
	positional, code, ok := parseInterleaved(fs, args)
	if !ok {
		return code
	}
	if len(positional) > 1 {
		fmt.Fprintf(stderr, "portico status: at most one GATEWAY, got %q\n", positional)
		fs.Usage()
		return exitUsage
	}
	nsSet := false
	fs.Visit(func(f *flag.Flag) { nsSet = nsSet || f.Name == "n" || f.Name == "namespace" })
	if all && nsSet {
		fmt.Fprintln(stderr, "portico status: -A and -n exclude each other")
		return exitUsage
	}

	// The default namespace, and the cluster client when there is one.
	var c client.Reader
	defaultNS := "default"
	if len(files) == 0 {
		cc := kubeClientConfig(*kubeconfig)
		if !nsSet {
			if ns, _, err := cc.Namespace(); err == nil && ns != "" {
				defaultNS = ns
			}
		}
		cfg, err := cc.ClientConfig()
		if err != nil {
			fmt.Fprintf(stderr, "portico status: kubeconfig: %v (or read files with -f)\n", err)
			return exitError
		}
		if c, err = client.New(cfg, client.Options{Scheme: kube.NewScheme()}); err != nil {
			fmt.Fprintf(stderr, "portico status: %v\n", err)
			return exitError
		}
	}
	if nsSet {
		defaultNS = namespace
	}

	opts := statustree.Options{ControllerName: *controller}
	if len(positional) == 1 {
		key, err := parseGatewayArg(positional[0], defaultNS)
		if err != nil {
			fmt.Fprintf(stderr, "portico status: %v\n", err)
			return exitUsage
		}
		opts.Gateway = &key
	}
	if *route != "" {
		ref, err := parseRouteArg(*route, defaultNS)
		if err != nil {
			fmt.Fprintf(stderr, "portico status: --route: %v\n", err)
			return exitUsage
		}
		opts.Route = &ref
	}
	if opts.Gateway == nil && opts.Route == nil && !all {
		opts.Namespace = defaultNS
	}

	var snap *resource.Snapshot
	var st statustree.Statuses
	source := "cluster"
	if len(files) > 0 {
		source = "files"
		var warnings []load.Warning
		var err error
		snap, warnings, err = load.PathsWith(load.Options{Limits: lf.limits()}, files...)
		if err != nil {
			fmt.Fprintf(stderr, "portico status: %v\n", err)
			return exitError
		}
		for _, w := range warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		maxRoute, maxGateway := budgets.values()
		st = statustree.DesiredStatuses(servedStatuses(snap, gatewayapi.Options{
			ControllerName: *controller, MaxRouteExpansion: maxRoute, MaxGatewayExpansion: maxGateway,
		}, stderr))
	} else {
		ctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		r := &clusterReader{c: c, stderr: stderr, scope: scopeNamespaces(opts, defaultNS)}
		var err error
		if snap, err = r.snapshot(ctx, &opts); err != nil {
			fmt.Fprintf(stderr, "portico status: %v\n", err)
			return exitError
		}
		st = statustree.ObjectStatuses(snap)
	}

	tree := statustree.Build(snap, st, opts)
	tree.Source = source
	if len(tree.Gateways) == 0 {
		fmt.Fprintf(stderr, "portico status: %s\n", nothingFound(snap, opts, *controller))
		if opts.Gateway != nil || opts.Route != nil {
			return exitError
		}
	}
	var err error
	if format.value == "json" {
		err = statustree.JSON(stdout, tree)
	} else {
		err = statustree.Text(stdout, tree)
	}
	if err != nil {
		fmt.Fprintf(stderr, "portico status: %v\n", err)
		return exitError
	}
	return exitOK
}

// parseInterleaved parses flags and positional arguments in any order
// (the flag package stops at the first positional one).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			return positional, exitOK, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// kubeClientConfig is the kubeconfig: the file given, else $KUBECONFIG
// and ~/.kube/config, else the in-cluster config.
func kubeClientConfig(path string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

// parseGatewayArg reads NS/NAME, or NAME in namespace ns.
func parseGatewayArg(s, ns string) (resource.Key, error) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return resource.Key{Namespace: ns, Name: parts[0]}, nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return resource.Key{Namespace: parts[0], Name: parts[1]}, nil
	}
	return resource.Key{}, fmt.Errorf("GATEWAY %q: want NAME or NAMESPACE/NAME", s)
}

// parseRouteArg reads KIND/NS/NAME, or KIND/NAME in namespace ns; KIND is
// a kind of route, in any case.
func parseRouteArg(s, ns string) (resource.Ref, error) {
	parts := strings.Split(s, "/")
	if len(parts) == 2 {
		parts = []string{parts[0], ns, parts[1]}
	}
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return resource.Ref{}, fmt.Errorf("%q: want KIND/NAMESPACE/NAME or KIND/NAME", s)
	}
	var names []string
	for _, k := range resource.RouteKinds {
		if strings.EqualFold(k.String(), parts[0]) {
			return resource.Ref{Kind: k, Key: resource.Key{Namespace: parts[1], Name: parts[2]}}, nil
		}
		names = append(names, k.String())
	}
	return resource.Ref{}, fmt.Errorf("%q: unknown kind %q (one of %s)", s, parts[0], strings.Join(names, ", "))
}

// servedStatuses translates snap as standalone's pipeline does and returns
// the statuses it would publish: the translation's, amended with what the
// xDS stage leaves out (gatewayapi.ServedStatuses).
func servedStatuses(snap *resource.Snapshot, opts gatewayapi.Options, stderr io.Writer) gatewayapi.StatusSet {
	res := gatewayapi.Translate(snap, opts)
	outcomes := map[string]gatewayapi.XDSOutcome{}
	for _, gw := range res.Gateways {
		r, err := translate.Translate(gw)
		if err != nil {
			fmt.Fprintf(stderr, "portico status: gateway %s: xDS translation failed: %v\n", gw.Key(), err)
			outcomes[gw.Key()] = gatewayapi.XDSOutcome{Failed: err.Error()}
			continue
		}
		if len(r.Problems) > 0 {
			o := gatewayapi.XDSOutcome{Dropped: make([]gatewayapi.Dropped, len(r.Problems))}
			for i, p := range r.Problems {
				o.Dropped[i] = gatewayapi.Dropped{Route: p.Route, Listener: p.Listener, Err: p.Err}
			}
			outcomes[gw.Key()] = o
		}
	}
	return gatewayapi.ServedStatuses(res.StatusSet, outcomes)
}

// nothingFound says why the tree is empty.
func nothingFound(snap *resource.Snapshot, opts statustree.Options, controller string) string {
	switch {
	case opts.Route != nil:
		r := opts.Route
		if _, ok := snap.Get(r.Kind, r.Key); !ok {
			return fmt.Sprintf("no %s %s/%s", r.Kind, r.Key.Namespace, r.Key.Name)
		}
		return fmt.Sprintf("%s %s/%s names no Gateway or ListenerSet of a GatewayClass of %s", r.Kind, r.Key.Namespace, r.Key.Name, controller)
	case opts.Gateway != nil:
		g := opts.Gateway
		if _, ok := snap.Gateways.Get(*g); !ok {
			return fmt.Sprintf("no Gateway %s/%s", g.Namespace, g.Name)
		}
		return fmt.Sprintf("Gateway %s/%s is not of a GatewayClass of %s", g.Namespace, g.Name, controller)
	case opts.Namespace != "":
		return fmt.Sprintf("no Gateway of a GatewayClass of %s in namespace %s (-A: every namespace)", controller, opts.Namespace)
	}
	return fmt.Sprintf("no Gateway of a GatewayClass of %s", controller)
}

// scopeNamespaces are the namespaces the command line names: those read
// when a kind cannot be listed in every namespace.
func scopeNamespaces(opts statustree.Options, defaultNS string) []string {
	set := map[string]bool{defaultNS: true}
	if opts.Namespace != "" {
		set[opts.Namespace] = true
	}
	if opts.Gateway != nil {
		set[opts.Gateway.Namespace] = true
	}
	if opts.Route != nil {
		set[opts.Route.Key.Namespace] = true
	}
	return sortedSet(set)
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// clusterReader reads the objects of the tree from the API server.
type clusterReader struct {
	c      client.Reader
	stderr io.Writer
	// scope: the namespaces the command line names.
	scope []string
	objs  []clusterObject
}

type clusterObject struct {
	kind resource.Kind
	key  resource.Key
	obj  resource.Object
}

// backendKinds are read in the namespaces of the backends only.
var backendKinds = []resource.Kind{resource.KindService, resource.KindEndpointSlice, resource.KindReferenceGrant}

// snapshot reads the objects: GatewayClasses and Namespaces (optional: a
// user who may not list them still gets a tree), the routes of every kind
// in every namespace, the Gateways and ListenerSets in every namespace,
// then the Services, EndpointSlices and ReferenceGrants of the namespaces
// of the backends of the routes naming those parents. A kind whose CRD is
// not installed has no objects. A kind the user may not list in every
// namespace is read in some, with a warning: the routes in the command
// line's namespaces, the parents in those and the namespaces the routes'
// parentRefs name. It sets opts.UnknownClasses and opts.Unreadable.
func (r *clusterReader) snapshot(ctx context.Context, opts *statustree.Options) (*resource.Snapshot, error) {
	if err := r.list(ctx, resource.KindGatewayClass, nil); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, err
		}
		fmt.Fprintln(r.stderr, "warning: may not list GatewayClasses: showing the Gateways of every class")
		opts.UnknownClasses = true
	}
	// Namespace labels decide allowedRoutes selectors; without them a
	// selector is assumed to match.
	if err := r.list(ctx, resource.KindNamespace, nil); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, err
		}
		fmt.Fprintln(r.stderr, "warning: may not list Namespaces: listener namespace selectors are assumed to match")
	}
	if err := r.listScoped(ctx, resource.RouteKinds, r.scope); err != nil {
		return nil, err
	}
	parentScope := map[string]bool{}
	for _, ns := range r.scope {
		parentScope[ns] = true
	}
	for _, o := range r.objs {
		if !o.kind.IsRoute() || (opts.Route != nil && *opts.Route != (resource.Ref{Kind: o.kind, Key: o.key})) {
			continue
		}
		if _, view, ok := resource.RouteOf(o.obj); ok {
			for _, p := range refs.ParentsOf(o.key.Namespace, view.Spec.ParentRefs) {
				parentScope[p.Namespace] = true
			}
		}
	}
	if err := r.listScoped(ctx, []resource.Kind{resource.KindGateway, resource.KindListenerSet}, sortedSet(parentScope)); err != nil {
		return nil, err
	}
	var unreadable []string
	for _, ns := range r.backendNamespaces(opts.Route) {
		for _, k := range backendKinds {
			if err := r.list(ctx, k, []string{ns}); err != nil {
				if !apierrors.IsForbidden(err) {
					return nil, err
				}
				if opts.Unreadable == nil {
					opts.Unreadable = map[string]bool{}
				}
				opts.Unreadable[ns] = true
				unreadable = append(unreadable, ns)
				break
			}
		}
	}
	if len(unreadable) > 0 {
		fmt.Fprintf(r.stderr, "warning: may not list the Services, EndpointSlices or ReferenceGrants of namespace(s) %s: their backends are shown as unknown\n",
			strings.Join(unreadable, ", "))
	}
	snap := resource.New()
	for _, o := range r.objs {
		if err := snap.Put(o.kind, o.key, o.obj); err != nil {
			return nil, err
		}
	}
	return snap.Build(), nil
}

// listScoped lists each kind in every namespace, or in those of scope
// when that is forbidden (one warning names the kinds).
func (r *clusterReader) listScoped(ctx context.Context, kinds []resource.Kind, scope []string) error {
	var narrowed, denied []string
	for _, kind := range kinds {
		err := r.list(ctx, kind, nil)
		if err == nil {
			continue
		}
		if !apierrors.IsForbidden(err) {
			return err
		}
		narrowed = append(narrowed, kind.String()+"s")
		for _, ns := range scope {
			if err := r.list(ctx, kind, []string{ns}); err != nil {
				if !apierrors.IsForbidden(err) {
					return err
				}
				denied = append(denied, kind.String()+"s in "+ns)
			}
		}
	}
	if len(narrowed) > 0 {
		fmt.Fprintf(r.stderr, "warning: may not list %s in every namespace: read namespace(s) %s only\n",
			strings.Join(narrowed, ", "), strings.Join(scope, ", "))
	}
	if len(denied) > 0 {
		fmt.Fprintf(r.stderr, "warning: may not list %s\n", strings.Join(denied, ", "))
	}
	return nil
}

// list reads the objects of kind in namespaces (nil: all, or the kind is
// cluster-scoped). A kind the API server does not serve (its CRD is not
// installed) has none.
func (r *clusterReader) list(ctx context.Context, kind resource.Kind, namespaces []string) error {
	d := resource.KindOf(kind)
	if namespaces == nil {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		list := d.NewList().(client.ObjectList)
		var lo []client.ListOption
		if ns != "" {
			lo = append(lo, client.InNamespace(ns))
		}
		if err := r.c.List(ctx, list, lo...); err != nil {
			if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				return nil
			}
			if apierrors.IsForbidden(err) {
				return err
			}
			return fmt.Errorf("listing %ss: %w", kind, err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, it := range items {
			obj, ok := it.(resource.Object)
			if !ok {
				continue
			}
			key := resource.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
			if d.ClusterScoped {
				key.Namespace = ""
			}
			r.objs = append(r.objs, clusterObject{kind, key, obj})
		}
	}
	return nil
}

// backendNamespaces are the namespaces of the Services the routes read so
// far send to (only route, when set), among routes naming a Gateway or
// ListenerSet read so far; sorted.
func (r *clusterReader) backendNamespaces(only *resource.Ref) []string {
	parents := map[refs.Object]bool{}
	for _, o := range r.objs {
		switch o.kind {
		case resource.KindGateway:
			parents[refs.Object{Group: refs.GroupGateway, Kind: refs.KindGateway, Namespace: o.key.Namespace, Name: o.key.Name}] = true
		case resource.KindListenerSet:
			parents[refs.Object{Group: refs.GroupGateway, Kind: refs.KindListenerSet, Namespace: o.key.Namespace, Name: o.key.Name}] = true
		}
	}
	set := map[string]bool{}
	for _, o := range r.objs {
		if !o.kind.IsRoute() || (only != nil && *only != (resource.Ref{Kind: o.kind, Key: o.key})) {
			continue
		}
		_, view, ok := resource.RouteOf(o.obj)
		if !ok {
			continue
		}
		named := false
		for _, p := range refs.ParentsOf(o.key.Namespace, view.Spec.ParentRefs) {
			named = named || parents[p.Object]
		}
		if !named {
			continue
		}
		for b := range resource.KindOf(o.kind).Route.Backends(o.obj) {
			if b.IsService() {
				set[b.Namespace] = true
			}
		}
	}
	return sortedSet(set)
}
