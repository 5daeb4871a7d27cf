package txn

import "errors"

// Errors returned by Coordinator methods. protocol maps each to a Kafka
// error code in its one table (protocol/errors.go).
var (
	// ErrNotCoordinator (NOT_COORDINATOR, 16): this broker does not lead the
	// transactional id's __transaction_state partition, or stopped leading
	// it while the request waited. The client looks the coordinator up again.
	ErrNotCoordinator = errors.New("txn: not coordinator")
	// ErrCoordinatorLoadInProgress (COORDINATOR_LOAD_IN_PROGRESS, 14): this
	// broker leads the partition but is still reading it; the client retries.
	ErrCoordinatorLoadInProgress = errors.New("txn: coordinator load in progress")
	// ErrCoordinatorNotAvailable (COORDINATOR_NOT_AVAILABLE, 15): the state
	// partition cannot take writes now (too few in-sync replicas, unknown
	// partition), or the transactional id is being removed.
	ErrCoordinatorNotAvailable = errors.New("txn: coordinator not available")
	// ErrConcurrentTransactions (CONCURRENT_TRANSACTIONS, 51): a state
	// transition of the transactional id is being written, or the previous
	// transaction is still completing (markers being written); the client
	// retries.
	ErrConcurrentTransactions = errors.New("txn: concurrent transactions")
	// ErrProducerFenced (PRODUCER_FENCED, 90): the request's producer epoch
	// is older than the transactional id's: a newer producer instance with
	// the same transactional id exists (or the transaction timed out and was
	// aborted with an epoch bump).
	ErrProducerFenced = errors.New("txn: producer fenced")
	// ErrInvalidProducerEpoch (INVALID_PRODUCER_EPOCH, 47): the request's
	// producer epoch does not match in a way that is not a fencing (an
	// EndTxn retry after an epoch bump of the coordinator's own, or an
	// epoch newer than the stored one).
	ErrInvalidProducerEpoch = errors.New("txn: invalid producer epoch")
	// ErrInvalidTxnState (INVALID_TXN_STATE, 48): the request is not legal in
	// the transaction's current state (EndTxn of another outcome than the one
	// completed, EndTxn of no transaction, a partition not in the
	// transaction for VerifyPartitions).
	ErrInvalidTxnState = errors.New("txn: invalid transaction state")
	// ErrInvalidProducerIDMapping (INVALID_PRODUCER_ID_MAPPING, 49): the
	// transactional id is unknown, or its producer id is not the request's.
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")
	// ErrInvalidTransactionTimeout (INVALID_TRANSACTION_TIMEOUT, 50): the
	// InitProducerId timeout is not positive or above
	// transaction.max.timeout.ms.
	ErrInvalidTransactionTimeout = errors.New("txn: invalid transaction timeout")
	// ErrTransactionalIDNotFound (TRANSACTIONAL_ID_NOT_FOUND, 105):
	// DescribeTransactions of an id this coordinator does not hold.
	ErrTransactionalIDNotFound = errors.New("txn: transactional id not found")
	// ErrInvalidRequest (INVALID_REQUEST, 42): an empty transactional id, or
	// an InitProducerId with only one of producer id and epoch set. Not in
	// the contract's list; Kafka answers these INVALID_REQUEST.
	ErrInvalidRequest = errors.New("txn: invalid request")
	// ErrRequestTimedOut (REQUEST_TIMED_OUT, 7) is in the contract, but the
	// coordinator answers a state write that was not replicated within
	// WriteTimeout ErrCoordinatorNotAvailable, as Kafka's
	// TransactionStateManager does (clients retry that one; a Java producer
	// treats REQUEST_TIMED_OUT from EndTxn as fatal). It stays for callers
	// that time out around the coordinator.
	ErrRequestTimedOut = errors.New("txn: request timed out")
)
