package records

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventNamespace holds the Events about the guarded (cluster-scoped)
// configurations, as kube-apiserver's own recorders do.
const EventNamespace = metav1.NamespaceDefault

// Bounds of an EventWriter.
const (
	// eventWriteTimeout bounds one Event write.
	eventWriteTimeout = 5 * time.Second
	// seriesFor is how long an Event keeps counting a series before a new
	// Event starts one (client-go's events recorder uses 6 minutes too).
	seriesFor = 6 * time.Minute
	// maxSeries bounds the series kept in memory; past it, a configuration's
	// next Event starts a new series.
	maxSeries = 1024
)

// EventWriter writes events.k8s.io/v1 Events synchronously: Eventf returns
// once the Event is stored, so the recorder's last flush on shutdown is
// written before the process exits (client-go's broadcaster writes from
// goroutines that its shutdown cancels). Each (configuration, reason) keeps
// one Event per series: later flushes patch it with the series count and
// their own note, so the Event always carries the latest note (client-go's
// recorder only bumps the count and keeps the first note). It never reads.
type EventWriter struct {
	client     client.Client
	controller string
	instance   string
	log        logr.Logger
	now        func() time.Time

	mu     sync.Mutex
	series map[seriesKey]*series
}

type seriesKey struct {
	kind, name, reason string
}

type series struct {
	name  string
	count int32
	start time.Time
}

// NewEventWriter returns a writer reporting as controller (the Events'
// reportingController) from instance (reportingInstance: the replica).
func NewEventWriter(c client.Client, controller, instance string, log logr.Logger) *EventWriter {
	return &EventWriter{client: c, controller: controller, instance: instance, log: log, now: time.Now, series: map[seriesKey]*series{}}
}

var _ EventRecorder = &EventWriter{}

// Eventf writes one Event about regarding (related is not used).
func (w *EventWriter) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	ctx, cancel := context.WithTimeout(context.Background(), eventWriteTimeout)
	defer cancel()
	if err := w.Write(ctx, regarding, eventtype, reason, action, fmt.Sprintf(note, args...)); err != nil {
		w.log.Error(err, "writing an Event failed", "reason", reason)
	}
}

// Write stores an Event: a new one, or the next of its series.
func (w *EventWriter) Write(ctx context.Context, regarding runtime.Object, eventtype, reason, action, note string) error {
	ref, err := objectReference(regarding)
	if err != nil {
		return err
	}
	key := seriesKey{kind: ref.Kind, name: ref.Name, reason: reason}
	now := w.now()
	w.mu.Lock()
	s := w.series[key]
	if s != nil && now.Sub(s.start) < seriesFor {
		s.count++
		next := *s
		w.mu.Unlock()
		if err := w.patch(ctx, &next, now, note); err == nil {
			return nil
		}
		// The Event is gone (expired, deleted) or unwritable: start a new series.
		w.mu.Lock()
	}
	s = &series{name: EventName(ref.Name, now), count: 1, start: now}
	if len(w.series) >= maxSeries {
		clear(w.series)
	}
	w.series[key] = s
	w.mu.Unlock()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: s.name, Namespace: EventNamespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           ref,
		Note:                note,
		Type:                eventtype,
	}
	return w.client.Create(ctx, ev)
}

// EventName is the name of an Event about the named configuration started
// at now: <name>.<nanoseconds in hex>, as client-go names Events, cut and
// hashed when the configuration's name leaves no room for the suffix.
func EventName(configuration string, now time.Time) string {
	return fitName(configuration, fmt.Sprintf(".%x", now.UnixNano()), configuration)
}

// patch counts one more occurrence of the series and replaces the note.
func (w *EventWriter) patch(ctx context.Context, s *series, now time.Time, note string) error {
	body, err := json.Marshal(map[string]any{
		"note":   note,
		"series": eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(now)},
	})
	if err != nil {
		return err
	}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: EventNamespace}}
	return w.client.Patch(ctx, ev, client.RawPatch(types.MergePatchType, body))
}

func objectReference(obj runtime.Object) (corev1.ObjectReference, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return corev1.ObjectReference{}, err
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID()}, nil
}
