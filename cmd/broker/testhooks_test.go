package main

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestClockOffsetHook: the env var shifts wall stamps by its value while
// durations between two readings stay monotonic; without it the clock is
// time.Now; a bad value is refused.
func TestClockOffsetHook(t *testing.T) {
	defer func() { wallNow = time.Now }()
	t.Setenv(testClockOffsetEnv, "-300000")
	if err := applyTestHooks(zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	a := wallNow()
	skew := time.Now().UnixMilli() - a.UnixMilli()
	if skew < 299_000 || skew > 301_000 {
		t.Fatalf("wall skew %d ms, want about 300000", skew)
	}
	time.Sleep(20 * time.Millisecond)
	if d := wallNow().Sub(a); d < 20*time.Millisecond || d > time.Second {
		t.Fatalf("duration between readings %s, want about 20 ms (monotonic)", d)
	}
	t.Setenv(testClockOffsetEnv, "5m")
	if err := applyTestHooks(zerolog.Nop()); err == nil {
		t.Fatal("a non-integer offset was accepted")
	}
}
