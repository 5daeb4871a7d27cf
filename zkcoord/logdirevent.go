package zkcoord

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Log dir event notifications (Kafka's LogDirEventNotificationZNode and
// LogDirEventNotificationSequenceZNode): a broker whose log dir failed
// writes
//
//	/log_dir_event_notification/log_dir_event_<seq>  PS  {"version":1,"broker":N,"event":1}
//
// (event 1 is LogDirFailure, the only one), and the controller, which
// watches the children, asks that broker which of its replicas are
// offline (ctrllogdir.go).

const (
	logDirEventNamePrefix = "log_dir_event_"
	logDirEventSeqPrefix  = logDirEventNotificationPath + "/" + logDirEventNamePrefix
	// logDirFailureEvent is LogDirEventNotificationHandler.LogDirFailureEvent.
	logDirFailureEvent = 1
	// logDirEventRetryMax bounds the wait between attempts to write one.
	logDirEventRetryMax = 5 * time.Second
)

// logDirEventNodePath is one child of /log_dir_event_notification, by its
// name (log_dir_event_<seq>).
func logDirEventNodePath(name string) string { return logDirEventNotificationPath + "/" + name }

// logDirEvent is the payload of a log dir event notification.
type logDirEvent struct {
	Version int   `json:"version"`
	Broker  int32 `json:"broker"`
	Event   int   `json:"event"`
}

func encodeLogDirEvent(broker int32) []byte {
	return marshal(logDirEvent{Version: 1, Broker: broker, Event: logDirFailureEvent})
}

// decodeLogDirEvent returns the broker of a LogDirFailure notification.
// Another event or version is an error, as Kafka's decode ignores what it
// cannot read.
func decodeLogDirEvent(data []byte) (int32, error) {
	var e logDirEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return -1, decodeErr("log dir event notification", err)
	}
	if e.Version != 1 || e.Event != logDirFailureEvent {
		return -1, decodeErr("log dir event notification", fmt.Errorf("version %d event %d", e.Version, e.Event))
	}
	return e.Broker, nil
}

// PropagateLogDirEvent writes this broker's log dir failure notification
// (Kafka's KafkaZkClient.propagateLogDirEvent), so that the controller
// learns which of its replicas went offline. A failed write is retried
// with backoff until it succeeds, ctx ends or the session closes; a
// write whose reply was lost may leave two notifications, which the
// controller handles as one.
func (s *Session) PropagateLogDirEvent(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		p, err := s.zk.Create(logDirEventSeqPrefix, encodeLogDirEvent(s.cfg.BrokerID), zk.FlagSequence)
		if err == nil {
			s.log.Info().Str("zk_path", s.zk.rel(p)).Msg("wrote log dir event notification")
			return nil
		}
		s.log.Warn().Err(err).Msg("write log dir event notification failed; will retry")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("write log dir event notification: %w", ctx.Err())
		case <-s.done:
			t.Stop()
			return fmt.Errorf("write log dir event notification: %w", ErrClosed)
		case <-t.C:
		}
		backoff = min(2*backoff, logDirEventRetryMax)
	}
}

// refreshLogDirEvents arms the /log_dir_event_notification children watch
// while this broker is the controller and hands the notifications to the
// loop (Kafka's LogDirEventNotificationHandler).
func (s *Session) refreshLogDirEvents() error {
	if !s.IsController() {
		return nil
	}
	if _, err := s.readChildren(watchKey{kind: wLogDirEvents}, logDirEventNotificationPath); err != nil {
		return err
	}
	s.postController(pendingEvents{logDirEvents: true})
	return nil
}
