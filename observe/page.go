package observe

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// pageRefreshSeconds is how often the page reloads itself.
const pageRefreshSeconds = 2

// page is the server-rendered status page: one table row per replica on
// this broker and, under a leader, one row per follower. The bars draw the
// seed documents' picture: the log from its start to the LEO, committed
// (below the HW) and not yet committed, and where each follower's LEO is.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ids":   formatIDs,
	"pct":   pct,
	"optn":  optInt,
	"ratio": formatRatio,
	"thr":   formatThrottled,
	"rate":  formatRate,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>broker {{.V.BrokerID}} replicas</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
td.name, th.name { text-align: left; }
tr.follower td { color: #555; font-size: 0.9em; background: #fafafa; }
tr.under td { background: #fff3f0; }
.bar { position: relative; width: 220px; height: 12px; background: #eee; }
.bar .hw { position: absolute; left: 0; top: 0; height: 12px; background: #4a9; }
.bar .leo { position: absolute; left: 0; top: 0; height: 12px; background: #eb5; }
.bar .f { position: absolute; top: 0; height: 12px; background: #36c; }
.osr { color: #c33; font-weight: bold; }
tr.txn td { color: #555; font-size: 0.9em; background: #fffbe8; }
tr.adding td { color: #555; font-size: 0.9em; background: #f3f7ff; }
.throttled { color: #a60; font-weight: bold; }
.due { color: #c33; font-weight: bold; }
p.legend span { display: inline-block; width: 1em; height: 0.8em; margin: 0 0.3em 0 1em; }
</style>
</head>
<body>
<h1>Broker {{.V.BrokerID}}{{if .V.Controller}} (controller){{end}}</h1>
<p id="summary">{{len .V.Partitions}} replicas; replica.lag.time.max.ms = {{.V.ReplicaLagTimeMaxMs}};
as of <time>{{.V.Time.Format "2006-01-02 15:04:05.000"}}</time>; this page reloads every {{.Refresh}} s.
JSON: <a href="/v1/partitions">/v1/partitions</a>, metrics: <a href="/metrics">/metrics</a>.</p>
{{- with .V.ReplicationThrottle}}
<p id="throttle">Replication throttle: leader.replication.throttled.rate {{rate .LeaderRate}}, throttled bytes sent {{printf "%.0f" .LeaderByteRate}} B/s;
follower.replication.throttled.rate {{rate .FollowerRate}}, throttled bytes fetched {{printf "%.0f" .FollowerByteRate}} B/s.</p>
{{- end}}
<p class="legend">AR = ISR + OSR. Consumers read below HW (the smallest LEO in the ISR); read_committed consumers below LSO
(the first offset of the oldest open transaction, or HW if there is none).
<span style="background:#4a9"></span>committed (&lt; HW)
<span style="background:#eb5"></span>written, not committed (HW … LEO)
<span style="background:#36c"></span>follower LEO</p>
<table id="partitions">
<thead><tr>
<th class="name">topic</th><th>partition</th><th class="name">role</th><th>leader</th><th>leader epoch</th>
<th class="name">AR</th><th class="name">ISR</th><th class="name">OSR</th>
<th>log start</th><th>LEO</th><th>HW</th><th>LSO</th><th class="name">log</th>
<th>records behind</th><th>caught up (ms ago)</th><th>ms until ISR removal</th><th>dirty ratio</th>
<th class="name">throttled</th><th class="name">reassignment</th>
</tr></thead>
<tbody>
{{- range .V.Partitions}}{{$p := .}}
<tr class="partition{{if .UnderReplicated}} under{{end}}" data-topic="{{.Topic}}" data-partition="{{.Partition}}" data-role="{{.Role}}">
<td class="name topic">{{.Topic}}</td><td class="partition">{{.Partition}}</td><td class="name role">{{.Role}}</td>
<td class="leader">{{.Leader}}</td><td class="epoch">{{.LeaderEpoch}}</td>
<td class="name ar">{{ids .Replicas}}</td><td class="name isr">{{ids .ISR}}</td><td class="name osr">{{ids .OSR}}</td>
<td class="logstart">{{.LogStartOffset}}</td><td class="leo">{{.LogEndOffset}}</td><td class="hw">{{.HighWatermark}}</td><td class="lso">{{.LastStableOffset}}</td>
<td class="name"><div class="bar"><div class="leo" style="width:{{pct .LogEndOffset .LogStartOffset .LogEndOffset}}%"></div><div class="hw" style="width:{{pct .HighWatermark .LogStartOffset .LogEndOffset}}%"></div></div></td>
<td>{{if .LeaderHighWatermark}}leader HW {{optn .LeaderHighWatermark}}{{end}}</td><td></td><td></td>
<td class="dirty">{{if .DirtyRatio}}{{ratio .DirtyRatio}}{{end}}</td>
<td class="name throttled">{{thr .LeaderThrottled .FollowerThrottled}}</td>
<td class="name reassignment">{{with .Reassignment}}adding {{ids .AddingReplicas}}, removing {{ids .RemovingReplicas}}{{end}}</td>
</tr>
{{- with .Reassignment}}{{range .Adding}}
<tr class="adding" data-topic="{{$p.Topic}}" data-partition="{{$p.Partition}}" data-broker="{{.BrokerID}}">
<td class="name" colspan="19">adding replica {{.BrokerID}}{{if .InISR}} (in ISR){{end}}: <span class="left">{{.RecordsLeft}} records, about {{.BytesLeft}} bytes left</span>{{if .Throttled}} <span class="throttled">(throttled by the leader)</span>{{end}}</td>
</tr>
{{- end}}{{end}}
{{- range .OngoingTxns}}
<tr class="txn" data-topic="{{$p.Topic}}" data-partition="{{$p.Partition}}" data-producer-id="{{.ProducerID}}">
<td class="name" colspan="19">ongoing transaction: producer id <span class="pid">{{.ProducerID}}</span>, epoch <span class="pepoch">{{.ProducerEpoch}}</span>, first offset <span class="first">{{.FirstOffset}}</span></td>
</tr>
{{- end}}
{{- range .Followers}}
<tr class="follower" data-topic="{{$p.Topic}}" data-partition="{{$p.Partition}}" data-broker="{{.BrokerID}}">
<td class="name"></td><td></td><td class="name">follower {{.BrokerID}}{{if not .InISR}} <span class="osr">(OSR)</span>{{end}}</td>
<td></td><td></td><td class="name"></td><td class="name"></td><td class="name"></td><td></td>
<td class="leo">{{.LogEndOffset}}</td><td></td><td></td>
<td class="name"><div class="bar"><div class="f" style="width:{{pct .LogEndOffset $p.LogStartOffset $p.LogEndOffset}}%"></div></div></td>
<td class="behind">{{optn .RecordsBehind}}</td><td class="caughtup">{{optn .CaughtUpMsAgo}}</td>
<td class="removal{{if .MsUntilISRRemoval}}{{if eq (optn .MsUntilISRRemoval) "0"}} due{{end}}{{end}}">{{optn .MsUntilISRRemoval}}</td><td></td>
<td class="name"></td><td class="name"></td>
</tr>
{{- end}}
{{- else}}
<tr class="empty"><td class="name" colspan="19">no replicas on this broker</td></tr>
{{- end}}
</tbody>
</table>
</body>
</html>
`))

func formatIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// pct is where offset lies between start and end, in percent, clamped.
func pct(offset, start, end int64) string {
	if end <= start {
		if offset >= end && end > 0 {
			return "100"
		}
		return "0"
	}
	v := float64(offset-start) / float64(end-start) * 100
	return fmt.Sprintf("%.1f", min(100, max(0, v)))
}

func optInt(p *int64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprint(*p)
}

// formatThrottled names the replication throttles that apply to a
// replica: "leader", "follower", both or none.
func formatThrottled(leader, follower bool) string {
	switch {
	case leader && follower:
		return "leader, follower"
	case leader:
		return "leader"
	case follower:
		return "follower"
	}
	return ""
}

// formatRate shows a quota bound: bytes per second, or unlimited.
func formatRate(p *int64) string {
	if p == nil {
		return "unlimited"
	}
	return fmt.Sprintf("%d B/s", *p)
}

// formatRatio shows a dirty ratio with two decimals.
func formatRatio(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *p)
}

func (o *Observer) servePage(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := page.Execute(&buf, struct {
		V       View
		Refresh int
	}{o.View(), pageRefreshSeconds}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}
