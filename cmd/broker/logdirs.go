package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/zkcoord"
)

// logDirFailureHandler is what partition.Manager tells of each log dir
// that an I/O error took offline (Kafka's ReplicaManager.handleLogDirFailure
// after the replicas stopped):
//
//   - with dirs still online, the broker writes its log dir event
//     notification (/log_dir_event_notification/log_dir_event_<seq>), so
//     the controller asks it which replicas are offline and elects leaders
//     elsewhere. The write retries on its own goroutine until it succeeds
//     or the session closes.
//   - with none left, it logs Kafka's "Shutdown broker because all log
//     dirs in ... have failed" and hands the failure to allFailed: serve
//     then stops as on SIGTERM (a controlled shutdown first, so that
//     leadership moves at once rather than after a session timeout, where
//     Kafka halts at once) and the process exits 1.
func logDirFailureHandler(logDirs []string, session *zkcoord.Session, log zerolog.Logger, allFailed chan<- error) func(partition.LogDirFailure) {
	return func(f partition.LogDirFailure) {
		if len(f.Online) == 0 {
			err := fmt.Errorf("all log dirs in %s have failed (last %s: %w)", strings.Join(logDirs, ", "), f.Dir, f.Err)
			log.Error().Err(f.Err).Strs("log_dirs", logDirs).
				Msg("Shutdown broker because all log dirs in " + strings.Join(logDirs, ", ") + " have failed")
			select {
			case allFailed <- err:
			default:
			}
			return
		}
		msg := "log dir offline; notifying the controller"
		if f.ReplicaOnly {
			msg = "replica log failed, its dir online; notifying the controller"
		}
		log.Warn().Err(f.Err).Str("dir", f.Dir).Int("partitions", len(f.Partitions)).Strs("online_dirs", f.Online).
			Msg(msg)
		go func() {
			if err := session.PropagateLogDirEvent(context.Background()); err != nil {
				log.Warn().Err(err).Str("dir", f.Dir).Msg("log dir event notification not written")
			}
		}()
	}
}
