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
		"backend tls policy deleted team1/svc0-tls",
		"tcp route team1/tcp1",
		"grant created team0/grant",
		"slice added team1/svc4-1-2",
		"route created team14/new951",
		"gateway class",
		"backend tls policy deleted team0/svc0-tls",
		"trust bundle deleted",
		"listener set team2/ls0",
		"slice address team0/svc5-1",
		"service appProtocol team3/grpc3",
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
