package workload

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The differential tests report failures by seed and step: the sequence
// of changes a seed makes is part of what they compare across runs and
// versions. This pins the first changes of one seed (as made before the
// kinds of change were split into functions).
func TestChangeSequenceIsPinned(t *testing.T) {
	want := []string{
		"grant created team1/grant",
		"route headers team11/route31",
		"slice address team16/svc3-1",
		"secret grant deleted",
		"slice added team1/svc4-1-2",
		"route created team14/new951",
		"secret grant created",
		"gateway class",
		"route path team9/route9",
		"route deleted team8/route8",
		"service deleted team18/svc7",
		"service port team7/svc5",
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
	if changeWeights != 46 {
		t.Errorf("the weights of the kinds of change sum to %d, want 46 (the draw of every seed so far)", changeWeights)
	}
}
