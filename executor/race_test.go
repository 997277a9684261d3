//go:build race

package executor_test

// raceEnabled: the race detector slows every memory access some 5-10x;
// tests that size their load by it use less.
const raceEnabled = true
