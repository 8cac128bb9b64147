package translate

import (
	"fmt"
	"testing"
)

func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		gw := generatedGateway(n)
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Translate(gw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestGeneratedGateway(t *testing.T) {
	res := mustTranslate(t, generatedGateway(1000))
	if len(res.Clusters) != 100 || len(res.Routes) != 1 {
		t.Fatalf("%d clusters, %d route configs", len(res.Clusters), len(res.Routes))
	}
	if _, err := res.Snapshot(); err != nil {
		t.Fatal(err)
	}
}
