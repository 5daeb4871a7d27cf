package protocol

// Helpers shared by the transaction handlers (InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
// WriteTxnMarkers) and by Produce's KIP-890 verification.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/txn"
)

// txnRequestTimeout bounds a call into the transaction coordinator, the
// group coordinator's TxnOffsetCommit, a WriteTxnMarkers wait for
// replication and a verification round trip: Kafka's request.timeout.ms
// default, which bounds the same waits there (these requests carry no
// timeout of their own).
const txnRequestTimeout = 30 * time.Second

func txnTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, txnRequestTimeout)
}

// fencedBefore is code as answered to a request of version v: a client
// older than minVersion does not know PRODUCER_FENCED and gets
// INVALID_PRODUCER_EPOCH, which it handles the same way, as Kafka does.
func fencedBefore(code int16, v, minVersion int16) int16 {
	if v < minVersion && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// batchProducer is what a produced partition's batch headers say of
// transactions: whether any batch is transactional, and the producer id
// and epoch of the transactional ones.
type batchProducer struct {
	transactional bool
	producerID    int64
	producerEpoch int16
	// mixed: transactional batches of more than one producer id.
	mixed bool
}

// The v2 record batch header fields read here (Kafka's
// DefaultRecordBatch): magic at 16, attributes at 21, producer id at 43,
// producer epoch at 51; the header is 61 bytes.
const (
	batchHeaderBytes      = 61
	batchAttrTransaction  = 0x10
	batchMagicOffset      = 16
	batchAttrOffset       = 21
	batchProducerIDOffset = 43
	batchEpochOffset      = 51
)

// scanBatches reads the transactional bit and producer of every v2 batch
// header in records. It stops at the first header it cannot read: the
// append refuses such records with its own error.
func scanBatches(records []byte) batchProducer {
	var bp batchProducer
	for rest := records; len(rest) >= batchHeaderBytes; {
		size := 12 + int64(int32(binary.BigEndian.Uint32(rest[8:12])))
		if size < batchHeaderBytes || size > int64(len(rest)) || rest[batchMagicOffset] != 2 {
			break
		}
		if binary.BigEndian.Uint16(rest[batchAttrOffset:])&batchAttrTransaction != 0 {
			pid := int64(binary.BigEndian.Uint64(rest[batchProducerIDOffset:]))
			if bp.transactional && pid != bp.producerID {
				bp.mixed = true
			}
			bp.transactional = true
			bp.producerID = pid
			bp.producerEpoch = int16(binary.BigEndian.Uint16(rest[batchEpochOffset:]))
		}
		rest = rest[size:]
	}
	return bp
}

// verifyInTxn asks the transaction coordinator of transactionalID
// whether tps are in the producer's ongoing transaction (KIP-890 part 1):
// the local Transactions when this broker leads the id's partition of
// __transaction_state in the metadata, else TxnVerifier to the leader.
// The answer is as Transactions.VerifyPartitions'.
func (s *Server) verifyInTxn(ctx context.Context, transactionalID string, producerID int64, producerEpoch int16, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	var p int32
	if s.cfg.Transactions != nil {
		p = s.cfg.Transactions.PartitionFor(transactionalID)
	} else {
		p = txn.PartitionFor(transactionalID, s.cfg.TransactionTopic.Partitions)
	}
	leader := cluster.NoLeader
	if info, ok := s.cfg.Metadata.Topic(transactionTopic); ok {
		for _, pi := range info.Partitions {
			if pi.Partition == p {
				leader = pi.State.Leader
			}
		}
	}
	if leader == cluster.NoLeader {
		return nil, fmt.Errorf("no leader for %s-%d: %w", transactionTopic, p, txn.ErrCoordinatorNotAvailable)
	}
	vctx, cancel := txnTimeout(ctx)
	defer cancel()
	if leader == s.cfg.BrokerID && s.cfg.Transactions != nil {
		return s.cfg.Transactions.VerifyPartitions(vctx, transactionalID, producerID, producerEpoch, tps)
	}
	if s.cfg.TxnVerifier == nil {
		return nil, fmt.Errorf("coordinator on broker %d and no inter-broker client: %w", leader, txn.ErrCoordinatorNotAvailable)
	}
	for _, b := range s.cfg.Metadata.Brokers() {
		if b.ID == leader {
			return s.cfg.TxnVerifier.VerifyPartitionsInTxn(vctx, b, transactionalID, producerID, producerEpoch, tps)
		}
	}
	return nil, fmt.Errorf("coordinator broker %d not alive: %w", leader, txn.ErrCoordinatorNotAvailable)
}

// verificationFailure is the produce error for a partition whose
// verification failed with err, as Kafka's ReplicaManager translates the
// coordinator's answer (AddPartitionsToTxnManager, postVerificationCallback):
// INVALID_TXN_STATE says the partition was not added to the transaction;
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, which producers expect
// here; a retriable failure to ask (the coordinator moving or loading,
// CONCURRENT_TRANSACTIONS, the network, a timeout) becomes
// NOT_ENOUGH_REPLICAS, which every producer retries without refreshing its
// metadata. The original error is kept as text only, so that the table
// maps the translated sentinel.
func verificationFailure(err error) error {
	switch {
	case errors.Is(err, txn.ErrInvalidTxnState), errors.Is(err, partition.ErrInvalidTxnState):
		return fmt.Errorf("partition was not added to the transaction (%v): %w", err, partition.ErrInvalidTxnState)
	case errors.Is(err, txn.ErrProducerFenced), errors.Is(err, txn.ErrInvalidProducerEpoch):
		return fmt.Errorf("%v: %w", err, partition.ErrInvalidProducerEpoch)
	case errors.Is(err, txn.ErrConcurrentTransactions), errors.Is(err, txn.ErrCoordinatorLoadInProgress),
		errors.Is(err, txn.ErrCoordinatorNotAvailable), errors.Is(err, txn.ErrNotCoordinator),
		errors.Is(err, txn.ErrRequestTimedOut), errors.Is(err, partition.ErrRequestTimedOut),
		errors.Is(err, cluster.ErrBrokerNotAvailable), errors.Is(err, ErrClientClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("unable to verify the partition has been added to the transaction, underlying error: %v: %w",
			err, partition.ErrNotEnoughReplicas)
	}
	return err
}

// The implementations the broker wires in.
var (
	_ Transactions  = (*txn.Coordinator)(nil)
	_ TxnPartitions = (*partition.Manager)(nil)
	_ TxnGroups     = (*group.Coordinator)(nil)
)
