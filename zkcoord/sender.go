package zkcoord

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
)

// BrokerSender carries the controller's requests to one broker. protocol
// implements it with Kafka's LeaderAndIsr, UpdateMetadata and StopReplica
// requests on the inter-broker listener; tests record them. Each call sends
// one request and waits for its response; an error means the request may
// not have been applied and the controller will send it again while the
// broker stays registered. Errors wrapping cluster.ErrStaleControllerEpoch
// or cluster.ErrStaleBrokerEpoch are final: the request is dropped.
type BrokerSender interface {
	LeaderAndIsr(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) error
	UpdateMetadata(ctx context.Context, to cluster.Broker, req cluster.UpdateMetadataRequest) error
	StopReplica(ctx context.Context, to cluster.Broker, req cluster.StopReplicaRequest) error
}

// Controller channel limits (Kafka's ControllerChannelManager keeps one
// unbounded queue and one send thread per broker; ours is bounded).
const (
	// brokerQueueLen bounds the requests waiting for one broker. A full
	// queue drops the new request with an Error log: the broker is alive
	// but not answering, and the next state change or its re-registration
	// resends what it needs.
	brokerQueueLen = 1024
	// sendTimeout bounds one attempt (controller.socket.timeout.ms is 30 s).
	sendTimeout = 30 * time.Second
	// sendBackoffMin and sendBackoffMax bound the wait between attempts.
	sendBackoffMin = 100 * time.Millisecond
	sendBackoffMax = 3 * time.Second
)

// ctrlRequest is one queued request.
type ctrlRequest struct {
	kind string         // for logs: LeaderAndIsr, UpdateMetadata, StopReplica
	to   cluster.Broker // the destination as the controller knew it when queuing
	send func(ctx context.Context, to cluster.Broker) error
}

// brokerQueue is the send queue and goroutine for one incarnation of one
// broker. The controller loop enqueues without blocking; the goroutine
// sends in order, retrying with backoff until the request succeeds or the
// queue is closed (the broker died, restarted with a new epoch, or the
// controller resigned), so a dead broker never blocks the others or the
// loop.
type brokerQueue struct {
	to     cluster.Broker // immutable: a new epoch gets a new queue
	ch     chan ctrlRequest
	ctx    context.Context
	cancel context.CancelFunc
	done   <-chan struct{} // the Session's
	log    zerolog.Logger
}

// requestQueue is where the controller loop puts the requests for one
// broker incarnation. *brokerQueue sends them from its own goroutine; the
// scripted tests send them at once, in order.
type requestQueue interface {
	// enqueue adds r without blocking. Caller is the controller loop.
	enqueue(r ctrlRequest)
	// close drops whatever is queued; later requests are dropped too.
	close()
}

var _ requestQueue = (*brokerQueue)(nil)

// newBrokerQueue starts the queue of broker incarnation to on a goroutine
// started by goFunc; done is the Session's. parent is the controller's
// context: cancelled when the controller stops or is fenced, it ends the
// queue and any send in flight, so a deposed controller stops talking to
// brokers at once (a send blocked on an unreachable broker is bounded by
// it, not by the ZooKeeper client).
func newBrokerQueue(parent context.Context, to cluster.Broker, goFunc func(func()) bool, done <-chan struct{}, log zerolog.Logger) *brokerQueue {
	ctx, cancel := context.WithCancel(parent)
	q := &brokerQueue{
		to:     to,
		ch:     make(chan ctrlRequest, brokerQueueLen),
		ctx:    ctx,
		cancel: cancel,
		done:   done,
		log:    log.With().Int32("to_broker", to.ID).Int64("broker_epoch", to.Epoch).Logger(),
	}
	if !goFunc(q.run) {
		cancel()
	}
	return q
}

// enqueue adds r without blocking; it drops r when the queue is full.
// Caller is the controller loop.
func (q *brokerQueue) enqueue(r ctrlRequest) {
	if q.ctx.Err() != nil {
		return
	}
	select {
	case q.ch <- r:
	default:
		q.log.Error().Str("request", r.kind).Int("queued", len(q.ch)).
			Msg("controller queue to broker is full: dropping request")
	}
}

// close drops everything queued and stops the goroutine.
func (q *brokerQueue) close() { q.cancel() }

func (q *brokerQueue) run() {
	for {
		select {
		case <-q.ctx.Done():
			return
		case <-q.done:
			q.cancel()
			return
		case r := <-q.ch:
			q.deliver(r)
		}
	}
}

// deliver sends r until it succeeds, fails finally, or the queue closes.
func (q *brokerQueue) deliver(r ctrlRequest) {
	backoff := sendBackoffMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(q.ctx, sendTimeout)
		err := r.send(ctx, r.to)
		cancel()
		switch {
		case err == nil:
			return
		case q.ctx.Err() != nil:
			return
		case errors.Is(err, cluster.ErrStaleControllerEpoch), errors.Is(err, cluster.ErrStaleBrokerEpoch):
			// Not retryable: the broker has seen a newer controller, or
			// this request was meant for an older incarnation of it.
			q.log.Warn().Err(err).Str("request", r.kind).Msg("controller request refused; dropping it")
			return
		}
		// Retryable: a connection or timeout error while the broker is
		// still registered (it may be starting or briefly unreachable).
		ev := q.log.Debug()
		if attempt%10 == 0 {
			ev = q.log.Warn()
		}
		ev.Err(err).Str("request", r.kind).Int("attempt", attempt).Msg("controller request failed; retrying")
		t := time.NewTimer(backoff)
		select {
		case <-q.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, sendBackoffMax)
	}
}
