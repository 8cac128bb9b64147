package statustree

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// negative are the condition types whose healthy state is False.
var negative = map[string]bool{
	"Conflicted":                     true,
	"OverlappingTLSConfig":           true,
	"PartiallyInvalid":               true,
	"InsecureFrontendValidationMode": true,
}

// Problem reports whether c is in its unhealthy state (Unknown included),
// or stale.
func (c Condition) Problem() bool {
	if c.Stale {
		return true
	}
	want := "True"
	if negative[c.Type] {
		want = "False"
	}
	return c.Status != want
}

// JSON writes t as indented JSON.
func JSON(w io.Writer, t *Tree) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

// Text writes t as an indented tree (see the package documentation),
// Gateways separated by a blank line.
func Text(w io.Writer, t *Tree) error {
	p := &printer{w: bufio.NewWriter(w)}
	for i, g := range t.Gateways {
		if i > 0 {
			p.line(0, false, "")
		}
		p.gateway(g)
	}
	return p.w.Flush()
}

type printer struct{ w *bufio.Writer }

// line writes one line at depth (two spaces a level), "! " in the margin
// when problem.
func (p *printer) line(depth int, problem bool, format string, args ...any) {
	indent := strings.Repeat("  ", depth)
	if problem && depth > 0 {
		indent = indent[:len(indent)-2] + "! "
	} else if problem {
		indent = "! "
	}
	s := fmt.Sprintf(format, args...)
	if s == "" {
		indent = ""
	}
	p.w.WriteString(indent + s + "\n")
}

func (p *printer) gateway(g Gateway) {
	p.line(0, false, "Gateway %s/%s  class %s", g.Namespace, g.Name, g.Class)
	if g.NoStatus {
		p.line(1, true, "no status: the controller has not taken the Gateway up (yet)")
	}
	p.conditions(1, g.Conditions)
	for _, l := range g.Listeners {
		p.listener(1, l)
	}
	p.unattached(1, g.Unattached)
	for _, s := range g.ListenerSets {
		p.line(1, false, "ListenerSet %s/%s", s.Namespace, s.Name)
		if s.NoStatus {
			p.line(2, true, "no status: the controller has not taken the ListenerSet up (yet)")
		}
		p.conditions(2, s.Conditions)
		for _, l := range s.Listeners {
			p.listener(2, l)
		}
		p.unattached(2, s.Unattached)
	}
}

func (p *printer) conditions(depth int, conds []Condition) {
	for _, c := range conds {
		s := c.Type + "=" + c.Status
		if c.Reason != "" {
			s += " " + c.Reason
		}
		if c.Message != "" {
			s += ": " + c.Message
		}
		if c.Stale {
			s += fmt.Sprintf(" (stale: observed generation %d, the object is at %d)", c.ObservedGeneration, c.Generation)
		}
		p.line(depth, c.Problem(), "%s", s)
	}
}

func (p *printer) listener(depth int, l Listener) {
	s := fmt.Sprintf("Listener %s  %s port %d", l.Name, l.Protocol, l.Port)
	if l.Hostname != "" {
		s += "  hostname " + l.Hostname
	}
	if l.AttachedRoutes != nil {
		s += fmt.Sprintf("  attachedRoutes %d", *l.AttachedRoutes)
	}
	p.line(depth, false, "%s", s)
	if l.AttachedRoutes == nil {
		p.line(depth+1, true, "no status for this listener")
	}
	p.conditions(depth+1, l.Conditions)
	for _, r := range l.Routes {
		p.route(depth+1, r)
	}
}

func (p *printer) unattached(depth int, routes []Route) {
	if len(routes) == 0 {
		return
	}
	p.line(depth, false, "Not attached to a listener")
	for _, r := range routes {
		p.route(depth+1, r)
	}
}

func (p *printer) route(depth int, r Route) {
	s := fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
	if r.SectionName != "" {
		s += "  sectionName " + r.SectionName
	}
	if r.Port != 0 {
		s += fmt.Sprintf("  port %d", r.Port)
	}
	p.line(depth, false, "%s", s)
	if r.Note != "" {
		p.line(depth+1, true, "%s", r.Note)
	}
	p.conditions(depth+1, r.Conditions)
	for _, b := range r.Backends {
		p.backend(depth+1, b)
	}
}

func (p *printer) backend(depth int, b Backend) {
	kind := b.Kind
	if b.Group != "" {
		kind = b.Group + "/" + b.Kind
	}
	s := fmt.Sprintf("backend %s %s/%s", kind, b.Namespace, b.Name)
	if b.Port != 0 {
		s += fmt.Sprintf(":%d", b.Port)
	}
	problem := true
	switch b.State {
	case BackendResolved:
		switch {
		case b.ReadyEndpoints == nil:
			s += "  resolved"
			problem = false
		case *b.ReadyEndpoints == 0:
			s += "  resolved, no ready endpoints: requests to it get 503"
		default:
			s += fmt.Sprintf("  resolved, %d ready endpoint%s", *b.ReadyEndpoints, plural(*b.ReadyEndpoints))
			problem = false
		}
	case BackendUnresolved:
		s += "  unresolved: " + b.Reason + ": " + b.Message
	default:
		s += "  unknown: " + b.Message
	}
	p.line(depth, problem, "%s", s)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
