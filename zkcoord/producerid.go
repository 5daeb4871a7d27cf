package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/go-zookeeper/zk"
)

// ProducerIDBlockSize is how many producer ids a broker reserves at a time
// (ProducerIdManager.PidBlockSize).
const ProducerIDBlockSize = 1000

// ProducerIDManager hands out idempotent producer ids from blocks reserved
// in /latest_producer_id_block (ProducerIdManager of 2.x). It satisfies
// protocol.ProducerIDs. Safe for concurrent use.
type ProducerIDManager struct {
	s    *Session
	mu   sync.Mutex
	next int64 // next id to hand out
	end  int64 // last id of the current block, inclusive; next > end means none
}

// ProducerIDs returns the session's producer id manager; the first
// InitProducerID reserves a block.
func (s *Session) ProducerIDs() *ProducerIDManager {
	return &ProducerIDManager{s: s, next: 0, end: -1}
}

// InitProducerID returns a producer id no other broker has handed out,
// with producer epoch 0.
func (m *ProducerIDManager) InitProducerID(ctx context.Context) (producerID int64, producerEpoch int16, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next > m.end {
		start, end, err := m.s.reserveProducerIDBlock(ctx)
		if err != nil {
			return -1, -1, err
		}
		m.next, m.end = start, end
	}
	id := m.next
	m.next++
	return id, 0, nil
}

// reserveProducerIDBlock claims the block after the one in
// /latest_producer_id_block with a setData conditional on the version it
// read; a BADVERSION means another broker claimed it first, so it reads
// again.
func (s *Session) reserveProducerIDBlock(ctx context.Context) (start, end int64, err error) {
	p := latestProducerIDBlockPath
	for {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		data, stat, err := s.zk.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			start, end = 0, ProducerIDBlockSize-1
			_, err := s.zk.Create(p, encodeProducerIDBlock(s.cfg.BrokerID, start, end), 0)
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			if err != nil {
				return 0, 0, fmt.Errorf("create %s: %w", p, err)
			}
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("get %s: %w", p, err)
		}
		start = 0
		if len(data) > 0 {
			_, lastEnd, err := decodeProducerIDBlock(data)
			if err != nil {
				return 0, 0, err
			}
			if lastEnd > math.MaxInt64-ProducerIDBlockSize {
				return 0, 0, fmt.Errorf("%s ends at %d: %w", p, lastEnd, ErrProducerIDsExhausted)
			}
			start = lastEnd + 1
		}
		end = start + ProducerIDBlockSize - 1
		_, err = s.zk.Set(p, encodeProducerIDBlock(s.cfg.BrokerID, start, end), stat.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			s.log.Debug().Str("zk_path", p).Int32("zk_version", stat.Version).Msg("producer id block taken by another broker; retrying")
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("set %s at zk_version %d: %w", p, stat.Version, err)
		}
		break
	}
	s.log.Info().Int64("block_start", start).Int64("block_end", end).Msg("reserved producer id block")
	return start, end, nil
}
