package debugpage

import (
	"encoding/json"
	"math"
	"time"

	"github.com/perkey/perkey/executor"
)

// The JSON form of a Snapshot. Names are snake_case; a duration is a
// number of seconds, with "_seconds" ending its name, and a rate a number
// per second ending in "_per_second": Prometheus's conventions (base units,
// the unit in the name), so a figure reads the same here as in the
// metrics, and a client needs no Go-specific decoding (a Go
// time.Duration's JSON is a bare count of nanoseconds). Times are RFC 3339
// strings.
type snapshotJSON struct {
	Time          time.Time     `json:"time"`
	UptimeSeconds float64       `json:"uptime_seconds"`
	Settings      settingsJSON  `json:"settings"`
	Stats         statsJSON     `json:"stats"`
	Rates         ratesJSON     `json:"rates"`
	Latency       *latencyJSON  `json:"latency"`
	HotKeys       []keyLoadJSON `json:"hot_keys"`
	OldestKeys    []keyLoadJSON `json:"oldest_keys"`
}

type settingsJSON struct {
	Workers         int       `json:"workers"`
	MaxQueuePerKey  int       `json:"max_queue_per_key"`
	MaxPending      int       `json:"max_pending"`
	Throughput      int       `json:"throughput"`
	Stripes         int       `json:"stripes"`
	Policy          string    `json:"policy"`
	Reentrant       bool      `json:"reentrant"`
	SlowTaskSeconds float64   `json:"slow_task_seconds"`
	Ages            bool      `json:"ages"`
	Started         time.Time `json:"started"`
}

type statsJSON struct {
	ActiveKeys int    `json:"active_keys"`
	Queued     int    `json:"queued"`
	Running    int    `json:"running"`
	Submitted  uint64 `json:"submitted"`
	Completed  uint64 `json:"completed"`
	Rejected   uint64 `json:"rejected"`
	Canceled   uint64 `json:"canceled"`
	Panicked   uint64 `json:"panicked"`
	Slow       uint64 `json:"slow"`
}

type ratesJSON struct {
	WindowSeconds      float64 `json:"window_seconds"`
	SubmittedPerSecond float64 `json:"submitted_per_second"`
	CompletedPerSecond float64 `json:"completed_per_second"`
	RejectedPerSecond  float64 `json:"rejected_per_second"`
	CanceledPerSecond  float64 `json:"canceled_per_second"`
	PanickedPerSecond  float64 `json:"panicked_per_second"`
	SlowPerSecond      float64 `json:"slow_per_second"`
}

type latencyJSON struct {
	Quantiles   []float64 `json:"quantiles"`
	WaitSeconds []float64 `json:"wait_seconds"`
	RunSeconds  []float64 `json:"run_seconds"`
}

type keyLoadJSON struct {
	Key               string  `json:"key"`
	Pending           int     `json:"pending"`
	HeldSeconds       float64 `json:"held_seconds"`
	OldestWaitSeconds float64 `json:"oldest_wait_seconds"`
	AgeSeconds        float64 `json:"age_seconds"`
}

// MarshalJSON encodes s in its JSON form: snake_case names, durations in
// seconds with "_seconds" in their names (see the package doc).
func (s Snapshot) MarshalJSON() ([]byte, error) {
	j := snapshotJSON{
		Time:          s.Time,
		UptimeSeconds: s.Uptime.Seconds(),
		Settings: settingsJSON{
			Workers: s.Settings.Workers, MaxQueuePerKey: s.Settings.MaxQueuePerKey, MaxPending: s.Settings.MaxPending,
			Throughput: s.Settings.Throughput, Stripes: s.Settings.Stripes, Policy: s.Settings.Policy,
			Reentrant: s.Settings.Reentrant, SlowTaskSeconds: s.Settings.SlowTask.Seconds(), Ages: s.Settings.Ages,
			Started: s.Settings.Started,
		},
		Stats: statsJSON{
			ActiveKeys: s.Stats.ActiveKeys, Queued: s.Stats.Queued, Running: s.Stats.Running,
			Submitted: s.Stats.Submitted, Completed: s.Stats.Completed, Rejected: s.Stats.Rejected,
			Canceled: s.Stats.Canceled, Panicked: s.Stats.Panicked, Slow: s.Stats.Slow,
		},
		Rates: ratesJSON{
			WindowSeconds: s.Rates.Window.Seconds(), SubmittedPerSecond: s.Rates.Submitted,
			CompletedPerSecond: s.Rates.Completed, RejectedPerSecond: s.Rates.Rejected,
			CanceledPerSecond: s.Rates.Canceled, PanickedPerSecond: s.Rates.Panicked, SlowPerSecond: s.Rates.Slow,
		},
		HotKeys:    keyLoadsJSON(s.HotKeys),
		OldestKeys: keyLoadsJSON(s.OldestKeys),
	}
	if l := s.Latency; l != nil {
		j.Latency = &latencyJSON{Quantiles: l.Quantiles, WaitSeconds: secondsOf(l.Wait), RunSeconds: secondsOf(l.Run)}
		if j.Latency.Quantiles == nil {
			j.Latency.Quantiles = []float64{}
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the JSON form MarshalJSON writes, so that a Go
// client can read a Snapshot back.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	var j snapshotJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Snapshot{
		Time:   j.Time,
		Uptime: duration(j.UptimeSeconds),
		Settings: executor.Settings{
			Workers: j.Settings.Workers, MaxQueuePerKey: j.Settings.MaxQueuePerKey, MaxPending: j.Settings.MaxPending,
			Throughput: j.Settings.Throughput, Stripes: j.Settings.Stripes, Policy: j.Settings.Policy,
			Reentrant: j.Settings.Reentrant, SlowTask: duration(j.Settings.SlowTaskSeconds), Ages: j.Settings.Ages,
			Started: j.Settings.Started,
		},
		Stats: executor.Stats{
			ActiveKeys: j.Stats.ActiveKeys, Queued: j.Stats.Queued, Running: j.Stats.Running,
			Submitted: j.Stats.Submitted, Completed: j.Stats.Completed, Rejected: j.Stats.Rejected,
			Canceled: j.Stats.Canceled, Panicked: j.Stats.Panicked, Slow: j.Stats.Slow,
		},
		Rates: Rates{
			Window: duration(j.Rates.WindowSeconds), Submitted: j.Rates.SubmittedPerSecond,
			Completed: j.Rates.CompletedPerSecond, Rejected: j.Rates.RejectedPerSecond,
			Canceled: j.Rates.CanceledPerSecond, Panicked: j.Rates.PanickedPerSecond, Slow: j.Rates.SlowPerSecond,
		},
		HotKeys:    keyLoadsOf(j.HotKeys),
		OldestKeys: keyLoadsOf(j.OldestKeys),
	}
	if l := j.Latency; l != nil {
		s.Latency = &Latency{Quantiles: l.Quantiles, Wait: durationsOf(l.WaitSeconds), Run: durationsOf(l.RunSeconds)}
	}
	return nil
}

func keyLoadsJSON(ls []KeyLoad) []keyLoadJSON {
	out := make([]keyLoadJSON, len(ls)) // never nil: the JSON has []
	for i, l := range ls {
		out[i] = keyLoadJSON{Key: l.Key, Pending: l.Pending, HeldSeconds: l.Held.Seconds(),
			OldestWaitSeconds: l.OldestWait.Seconds(), AgeSeconds: l.Age.Seconds()}
	}
	return out
}

func keyLoadsOf(ls []keyLoadJSON) []KeyLoad {
	out := make([]KeyLoad, len(ls))
	for i, l := range ls {
		out[i] = KeyLoad{Key: l.Key, Pending: l.Pending, Held: duration(l.HeldSeconds),
			OldestWait: duration(l.OldestWaitSeconds), Age: duration(l.AgeSeconds)}
	}
	return out
}

func secondsOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

func durationsOf(ss []float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = duration(s)
	}
	return out
}

// duration converts s seconds to a Duration, to the nearest nanosecond.
func duration(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
