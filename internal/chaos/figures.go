package chaos

import (
	"slices"
	"sort"
	"time"
)

// Figures are the per-scenario numbers of reliability.md §6.3.
type Figures struct {
	// Unavailability windows over (fault, partition): the longest gap
	// between acknowledgements of the partition from the last one before
	// the fault to the next fault (or the end of the writes).
	UnavailP50, UnavailP99, UnavailMax time.Duration
	// Timeline of faults aimed at a broker that led partitions (medians):
	// fault -> /brokers/ids/N gone, -> new leader in a state znode, -> the
	// first acknowledgement on that partition after the new leader.
	Detect, Elect, FirstAck time.Duration
	Timelines               int // how many faults the medians cover
	ISRShrinks, ISRExpands  int
	Elections               int // leader_epoch increments
	ControllerChanges       int
	LatencyP50, LatencyP99  time.Duration // of acknowledged writes
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// ComputeFigures derives the figures from a run's history and samples.
func ComputeFigures(writes []Write, faults []FaultEvent, samples []Sample, parts int32, end time.Duration) Figures {
	var f Figures
	oks := map[int32][]time.Duration{}
	var lat []time.Duration
	for _, w := range writes {
		if w.Outcome == OK {
			oks[w.Partition] = append(oks[w.Partition], w.Complete)
			lat = append(lat, w.Complete-w.Invoke)
		}
	}
	for p := range oks {
		slices.Sort(oks[p])
	}
	f.LatencyP50, f.LatencyP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	var windows []time.Duration
	for i, ft := range faults {
		to := end
		if i+1 < len(faults) {
			to = faults[i+1].Start
		}
		for p := int32(0); p < parts; p++ {
			ts := oks[p]
			from := ft.Start
			// Count from the last acknowledgement before the fault.
			if j := sort.Search(len(ts), func(k int) bool { return ts[k] >= ft.Start }); j > 0 {
				from = ts[j-1]
			}
			prev, gap := from, time.Duration(0)
			for _, t := range ts {
				if t < ft.Start || t > to {
					continue
				}
				gap = max(gap, t-prev)
				prev = t
			}
			gap = max(gap, to-prev)
			windows = append(windows, gap)
		}
	}
	f.UnavailP50, f.UnavailP99 = quantile(windows, 0.5), quantile(windows, 0.99)
	for _, w := range windows {
		f.UnavailMax = max(f.UnavailMax, w)
	}
	var det, ele, ack []time.Duration
	for _, ft := range faults {
		if ft.Target < 0 || len(ft.Led) == 0 {
			continue
		}
		var t1, t2 time.Duration = -1, -1
		elected := int32(-1)
		for _, s := range samples {
			if s.At < ft.Start {
				continue
			}
			if t1 < 0 && s.Brokers != nil && !s.Brokers[ft.Target] {
				t1 = s.At
			}
			if t2 < 0 {
				for _, p := range ft.Led {
					if int(p) < len(s.States) && s.States[p].Leader >= 0 && s.States[p].Leader != ft.Target {
						t2, elected = s.At, p
						break
					}
				}
			}
			if t1 >= 0 && t2 >= 0 {
				break
			}
		}
		if t2 < 0 {
			continue // leadership never moved: no timeline
		}
		f.Timelines++
		if t1 >= 0 {
			det = append(det, t1-ft.Start)
		}
		ele = append(ele, t2-ft.Start)
		ts := oks[elected]
		if j := sort.Search(len(ts), func(k int) bool { return ts[k] >= t2 }); j < len(ts) {
			ack = append(ack, ts[j]-ft.Start)
		}
	}
	f.Detect, f.Elect, f.FirstAck = quantile(det, 0.5), quantile(ele, 0.5), quantile(ack, 0.5)
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if a.Controller != b.Controller && b.Controller >= 0 {
			f.ControllerChanges++
		}
		for p := range b.States {
			if p >= len(a.States) || a.States[p].Leader == -2 || b.States[p].Leader == -2 {
				continue
			}
			switch {
			case len(b.States[p].ISR) < len(a.States[p].ISR):
				f.ISRShrinks++
			case len(b.States[p].ISR) > len(a.States[p].ISR):
				f.ISRExpands++
			}
			if b.States[p].LeaderEpoch > a.States[p].LeaderEpoch {
				f.Elections++
			}
		}
	}
	return f
}
