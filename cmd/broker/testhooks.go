package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/rs/zerolog"
)

// testClockOffsetEnv names the test-only wall-clock offset (milliseconds,
// may be negative) that the chaos matrix's clock-skew scenario
// (reliability.md §5 #25) sets on one broker. libfaketime cannot reach a Go
// binary, which reads the clock through the vDSO, so the offset is applied
// here. It is read only when set; a broker started without it runs on
// time.Now.
const testClockOffsetEnv = "KAFKAZK_TEST_CLOCK_OFFSET_MS"

// wallNow is the clock the broker stamps and ages data with: the replica
// manager (LogAppendTime, retention, ISR lag), the group coordinator
// (commit and expiry timestamps, sessions) and the transaction coordinator
// (transaction start and timeouts). time.Now unless applyTestHooks
// offsets it. The offset clock is time.Now().Add(offset), which keeps the
// monotonic reading: durations between two of its readings (lag times,
// session timeouts) are unaffected, only wall stamps move.
var wallNow = time.Now

// applyTestHooks reads the test-only environment; an invalid value is an
// error, so a misconfigured test does not run unskewed by accident.
func applyTestHooks(log zerolog.Logger) error {
	v, ok := os.LookupEnv(testClockOffsetEnv)
	if !ok {
		return nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", testClockOffsetEnv, v, err)
	}
	wallNow = offsetClock(time.Duration(ms) * time.Millisecond)
	log.Warn().Int64("offset_ms", ms).Msg("test hook: wall clock offset (" + testClockOffsetEnv + ")")
	return nil
}

// offsetClock is time.Now shifted by d.
func offsetClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}
