package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/logstore"
)

// CleanShutdownFile is Kafka's clean-shutdown marker (LogLoader's
// CleanShutdownFileName): Manager.Close writes it in each log dir once
// every log of the dir is closed and every checkpoint written; NewManager
// reads and deletes it, and the logs of a dir that had it open with
// logstore.Config.CleanShutdown, reading no segment data.
const CleanShutdownFile = ".kafka_cleanshutdown"

// takeCleanShutdownMarker reports whether dir holds the marker and
// deletes it, durably (the directory is fsynced), before any log of the
// dir is opened or written: a crash from here on is unclean.
func takeCleanShutdownMarker(dir string) (bool, error) {
	path := filepath.Join(dir, CleanShutdownFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read clean shutdown marker %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("delete clean shutdown marker %s: %w", path, err)
	}
	if err := logstore.OSFS.SyncDir(dir); err != nil {
		return false, fmt.Errorf("fsync %s: %w", dir, err)
	}
	return true, nil
}

// writeCleanShutdownMarker writes dir's marker, empty as Kafka's before
// KIP-966, durably.
func writeCleanShutdownMarker(dir string) error {
	if err := logstore.WriteFileAtomic(filepath.Join(dir, CleanShutdownFile), nil); err != nil {
		return fmt.Errorf("write clean shutdown marker in %s: %w", dir, err)
	}
	return nil
}

// cleanOpen says whether tp's log, in log dir dir, opens as after a clean
// shutdown: dir had the marker at start and this is the log's first open
// by this Manager. A log closed and opened again (a StopReplica then a
// LeaderAndIsr) opens as after a crash, as it may have failed meanwhile.
func (m *Manager) cleanOpen(tp cluster.TopicPartition, dir string) bool {
	m.cleanMu.Lock()
	defer m.cleanMu.Unlock()
	if len(m.cleanDirs) == 0 {
		return false
	}
	first := !m.cleanOpened[tp]
	m.cleanOpened[tp] = true
	return first && m.cleanDirs[dir]
}
