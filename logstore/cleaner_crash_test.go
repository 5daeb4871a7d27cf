package logstore

import (
	"errors"
	"fmt"
	"testing"
)

// TestCleanCrashAtEveryStep: a clean pass over a MemFS log is interrupted
// at each of its file operations in turn: either the machine crashes there
// (the operation and everything after it never happen, then MemFS.Crash
// reverts what was not synced, or the kernel had written back everything
// done before it: CrashWith) or just that operation fails and the log is
// closed. Reopening (with the recovery point from before the pass, and
// with 0) must give a log whose every record is the original one at its
// offset, with no offset twice, holding at least every record the
// completed pass keeps: the old segments or the new ones, never neither,
// never both. A leftover .cleaned is gone and a .swap completed.
func TestCleanCrashAtEveryStep(t *testing.T) {
	const dir = "/topic-0"
	build := func(fsys *MemFS) (*Log, Config) {
		cfg := smallSegConfig(t, 300)
		cfg.FS = fsys
		l, err := Open(dir, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		writeRounds(t, l, 10, 4, 3, 1000)
		mustAppend(t, l, kvBatch(t, kvOpts{ts: 1000}, k("active", "1")))
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		return l, cfg
	}
	// The reference: the old content and what a whole pass leaves.
	ref := NewMemFS()
	l, _ := build(ref)
	old, _ := logContents(t, l)
	ops0 := ref.Ops()
	if _, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
		t.Fatal(err)
	}
	steps := int(ref.Ops() - ops0)
	cleaned, _ := logContents(t, l)
	_ = l.Close()
	t.Logf("a clean pass takes %d file operations", steps)
	if steps < 10 || len(cleaned) >= len(old) {
		t.Fatalf("%d steps, %d records of %d kept", steps, len(cleaned), len(old))
	}
	oldAt := map[int64]string{}
	for _, r := range old {
		oldAt[r.offset] = r.raw
	}
	check := func(t *testing.T, l *Log, leo int64) {
		t.Helper()
		got, _ := logContents(t, l)
		have := map[int64]bool{}
		for _, r := range got {
			if raw, ok := oldAt[r.offset]; !ok || raw != r.raw {
				t.Fatalf("record at %d is not the original one", r.offset)
			}
			have[r.offset] = true
		}
		for _, r := range cleaned {
			if !have[r.offset] {
				t.Fatalf("record at %d (key %q) lost", r.offset, r.key)
			}
		}
		if l.LogEndOffset() != leo {
			t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
		}
		names, err := l.fs.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if len(n) > 5 && (n[len(n)-5:] == swapSuffix || n[len(n)-8:] == cleanedSuffix) {
				t.Fatalf("%s left after recovery", n)
			}
		}
		// The recovered log cleans to the same result.
		if _, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16))); err != nil {
			t.Fatalf("clean after recovery: %v", err)
		}
		again, _ := logContents(t, l)
		if len(again) != len(cleaned) {
			t.Fatalf("clean after recovery leaves %d records, want %d", len(again), len(cleaned))
		}
	}
	for step := range steps {
		for _, mode := range []string{"crash", "writeback", "fail"} {
			for _, rpZero := range []bool{false, true} {
				t.Run(fmt.Sprintf("step=%d/%s/rp0=%v", step, mode, rpZero), func(t *testing.T) {
					fsys := NewMemFS()
					l, cfg := build(fsys)
					leo, rp := l.LogEndOffset(), l.RecoveryPoint()
					if rpZero {
						rp = 0
					}
					n := 0
					fsys.SetInjector(func(op MemOp, name string) error {
						n++
						if n == step+1 || (mode != "fail" && n > step+1) {
							return fmt.Errorf("%w: %s %s", ErrInjected, op, name)
						}
						return nil
					})
					_, err := l.Clean(cleanCfg(NewOffsetMap(1 << 16)))
					if err == nil {
						t.Fatalf("Clean succeeded with step %d failing", step)
					}
					if !errors.Is(err, ErrInjected) && !errors.Is(err, ErrStorage) {
						t.Fatalf("Clean: %v", err)
					}
					switch mode {
					case "crash":
						fsys.Crash()
					case "writeback":
						// The kernel had written back everything, renames
						// and removals included, though not all was synced.
						fsys.CrashWith(func(_ string, _, current []byte) []byte { return current })
					default:
						fsys.SetInjector(nil)
						_ = l.Close()
					}
					l2, err := Open(dir, cfg, rp)
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					defer l2.Close()
					check(t, l2, leo)
				})
			}
		}
	}
}
