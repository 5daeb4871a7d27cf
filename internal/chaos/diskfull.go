package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Disk full (reliability.md §5 #24): a broker's data dir on a small tmpfs
// of its own (Scenario.Tmpfs, mounted before the broker first starts,
// unmounted when the cluster closes), which the nemesis fills. Mounting
// needs CAP_SYS_ADMIN; without it the scenario is an error that says so.

// mountTmpfs mounts a tmpfs of size bytes at dir.
func mountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount a %d-byte tmpfs at %s (needs CAP_SYS_ADMIN): %w: %s", size, dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unmount lazily unmounts dir (a killed broker may still hold files).
func unmount(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// FillDisk writes a filler file into broker id's data dir until the
// filesystem is full, keeps it full for d while the workload runs, then
// deletes the filler (#24).
func (e *Env) FillDisk(id int32, d time.Duration) {
	b := e.C.Broker(id)
	end := e.H.Fault("disk-full", id, e.Led(id))
	defer end()
	path := filepath.Join(b.DataDir, "chaos-filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		e.Err = fmt.Errorf("disk full: %w", err)
		return
	}
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				e.Err = fmt.Errorf("disk full: writing the filler: %w", err)
			}
			break
		}
	}
	f.Close()
	e.note("broker %d's data dir filled (%d MiB of filler)", id, n>>20)
	time.Sleep(d)
	if err := os.Remove(path); err != nil {
		e.note("disk full: %v", err)
	}
}
