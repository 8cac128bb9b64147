// Package re2 bounds the cost of a regular expression the way Envoy does.
//
// Envoy compiles every regular expression of a route table with RE2 and
// refuses the whole RouteConfiguration when one compiles to a program
// larger than its runtime limit re2.max_program_size.error_level (100 by
// default). One tenant's regex must not do that to every route of a
// listener, so Portico raises Envoy's limit to MaxProgramSize in every
// bootstrap it writes and refuses, per route, an expression whose program
// could exceed it.
//
// RE2 is C++ and the Go module proxy has no binding of it, so ProgramSize
// estimates instead of compiling: it parses with Go's regexp/syntax (the
// RE2 dialect) and adds up an upper bound of the instructions RE2 emits
// for each node. RE2 compiles to UTF-8 byte ranges: a rune of k bytes is k
// instructions, and a character class is at most 2k-1 byte sequences of k
// instructions per range and UTF-8 length (RE2 shares suffixes, so it
// emits fewer); repetitions are expanded as RE2 expands them. The bound is
// checked against a real Envoy in test/envoy (TestRegexProgramSize): every
// expression it accepts, Envoy accepts at MaxProgramSize.
package re2

import (
	"fmt"
	"regexp/syntax"
	"unicode/utf8"
)

// MaxProgramSize is the largest RE2 program Portico lets a route use, and
// the re2.max_program_size.error_level of the Envoy bootstraps it writes.
const MaxProgramSize = 1000

// baseCost covers the instructions RE2 adds to every program: the match
// and fail instructions and the unanchored-search prefix.
const baseCost = 5

// ProgramSize parses expr as RE2 and returns an upper bound of the size of
// the program RE2 compiles it to.
func ProgramSize(expr string) (int, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return 0, err
	}
	return baseCost + cost(re, 0), nil
}

// Check returns an error when expr is not RE2 or its program could exceed
// MaxProgramSize.
func Check(expr string) error {
	n, err := ProgramSize(expr)
	if err != nil {
		return err
	}
	if n > MaxProgramSize {
		return fmt.Errorf("the expression is too complex: its RE2 program may have %d instructions, more than the %d allowed", n, MaxProgramSize)
	}
	return nil
}

// saturate keeps sums from overflowing on absurd repetitions: anything
// above it is over every limit anyway.
const saturate = 1 << 30

func add(a, b int) int { return min(a+b, saturate) }

func mul(a, b int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > saturate/b {
		return saturate
	}
	return a * b
}

// maxDepth bounds the recursion; syntax.Parse already limits nesting to
// 1000, this keeps a future change of that from costing the stack.
const maxDepth = 2000

func cost(re *syntax.Regexp, depth int) int {
	if depth > maxDepth {
		return saturate
	}
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch:
		return 1
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				// Case folding makes each rune a small class.
				n = add(n, classCost([]rune{r, r, r + 1, r + 1}))
				continue
			}
			n = add(n, runeLen(r))
		}
		return n
	case syntax.OpCharClass:
		return classCost(re.Rune)
	case syntax.OpAnyCharNotNL:
		return classCost([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune})
	case syntax.OpAnyChar:
		return classCost([]rune{0, utf8.MaxRune})
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 1
	case syntax.OpCapture:
		return add(cost(re.Sub[0], depth+1), 2)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return add(cost(re.Sub[0], depth+1), 2)
	case syntax.OpRepeat:
		sub := cost(re.Sub[0], depth+1)
		if re.Max == -1 {
			// x{n,} is n copies and a star.
			return add(mul(sub, re.Min+1), 2)
		}
		// x{n,m} is n copies and m-n optional ones.
		return add(mul(add(sub, 2), re.Max), 1)
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n = add(n, cost(s, depth+1))
		}
		return n
	case syntax.OpAlternate:
		n := len(re.Sub)
		for _, s := range re.Sub {
			n = add(n, cost(s, depth+1))
		}
		return n
	}
	return saturate // an operator this package does not know
}

func runeLen(r rune) int {
	if n := utf8.RuneLen(r); n > 0 {
		return n
	}
	return 3 // invalid runes compile as U+FFFD
}

// utf8Bounds are the last runes of 1-, 2-, 3- and 4-byte UTF-8.
var utf8Bounds = [4]rune{0x7F, 0x7FF, 0xFFFF, utf8.MaxRune}

// classCost bounds the instructions of a class given as [lo, hi] pairs:
// each range is split at the UTF-8 length boundaries, and a piece of k-byte
// runes takes at most 2k-1 sequences of k byte ranges, plus one
// alternation per sequence.
func classCost(ranges []rune) int {
	n := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		start := rune(0)
		for k, end := range utf8Bounds {
			if lo <= end && hi >= start {
				seqs := 2*(k+1) - 1
				n = add(n, seqs*(k+1)+seqs)
			}
			start = end + 1
		}
	}
	return max(n, 1)
}
