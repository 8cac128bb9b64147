package workload

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The differential tests report failures by seed and step: the sequence
// of changes a seed makes is part of what they compare across runs and
// versions. This pins the first changes of one seed (as made since the
// backend TLS objects were added: a new kind of change draws anew).
func TestChangeSequenceIsPinned(t *testing.T) {
	want := []string{
		"gateway class",
		"backend tls policy restored team1/svc0-tls",
		"route deleted team8/route28",
		"slice not ready team9/svc5-1",
		"grpc route deleted team0/grpc0",
		"slice added team1/svc4-1-2",
		"route created team13/new951",
		"gateway class",
		"backend tls policy deleted team0/svc0-tls",
		"trust bundle deleted",
		"route deleted team8/route8",
		"service deleted team18/svc7",
	}
	rng := rand.New(rand.NewPCG(1, 99))
	s := Rich(40)
	var got []string
	for range want {
		var desc string
		s, desc = Change(s, rng)
		got = append(got, desc)
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes of seed (1, 99):\n got %q\nwant %q", got, want)
	}
	if changeWeights != 49 {
		t.Errorf("the weights of the kinds of change sum to %d, want 49 (the draw of every seed so far)", changeWeights)
	}
}
