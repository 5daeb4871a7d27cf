package main

import (
	"syscall"

	"github.com/rs/zerolog"
)

// fileCacheShare is the part of the open-file limit the log segments'
// FileCache may hold; the rest is for sockets (clients, replication,
// ZooKeeper), index files opened for a moment, checkpoints and the
// process itself.
const fileCacheShare = 2

// Bounds of the FileCache capacity: at least enough for a few hot
// partitions, at most what a broker could use with an unlimited limit.
const (
	minFileCache = 64
	maxFileCache = 1 << 20
)

// fileCacheCapacity is the capacity of the broker's logstore.FileCache:
// half the soft RLIMIT_NOFILE, which the Go runtime raised to the hard
// limit at start (so this is the hard limit, unless it is unlimited).
func fileCacheCapacity(log zerolog.Logger) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn().Err(err).Int("open_files", minFileCache*16).Msg("cannot read the open file limit; bounding the log file cache")
		return minFileCache * 16
	}
	n := capacityFor(rl.Cur)
	log.Info().Uint64("rlimit_nofile", rl.Cur).Int("log_file_cache", n).Msg("open .log files bounded")
	return n
}

// capacityFor is fileCacheCapacity for a soft limit of soft.
func capacityFor(soft uint64) int {
	n := soft / fileCacheShare
	return int(min(max(n, minFileCache), maxFileCache))
}
