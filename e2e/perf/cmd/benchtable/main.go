// Command benchtable reads `go test -bench` output of the perf suite on
// stdin and prints one table: the median of every benchmark's runs (ns/op,
// B/op, allocs/op), its ratio to the encoding/json floor and to the fastest
// strict decoder's floor, and the spread of its runs (the machine's noise).
// A second table shows the scale benchmarks against a single mapping.
//
// `make bench` runs the suite in rounds (one `go test -count 1` process
// each) and concatenates them, so the i-th sample of every benchmark comes
// from the same round, seconds apart: each ratio is the median over rounds
// of the ratio within a round, which cancels most of the drift of a machine
// shared with other work.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// row is one benchmark's samples, by unit.
type row struct {
	name    string
	samples map[string][]float64
}

func (r *row) median(unit string) (float64, bool) {
	s := slices.Clone(r.samples[unit])
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// ratio is the median over rounds of r's ns/op over base's ns/op in the
// same round.
func (r *row) ratio(base *row) float64 {
	a, b := r.samples["ns/op"], base.samples["ns/op"]
	var rs []float64
	for i := range min(len(a), len(b)) {
		rs = append(rs, a[i]/b[i])
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

// spread is (max-min)/median of ns/op, in percent.
func (r *row) spread() float64 {
	s := r.samples["ns/op"]
	med, _ := r.median("ns/op")
	if len(s) < 2 || med == 0 {
		return 0
	}
	return (slices.Max(s) - slices.Min(s)) / med * 100
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(in io.Reader) (map[string]*row, []string, error) {
	rows := map[string]*row{}
	var order []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r, ok := rows[m[1]]
		if !ok {
			r = &row{name: m[1], samples: map[string][]float64{}}
			rows[m[1]] = r
			order = append(order, m[1])
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			r.samples[f[i+1]] = append(r.samples[f[i+1]], v)
		}
	}
	return rows, order, sc.Err()
}

// paths are the comparison rows, in print order, per entry count.
var paths = []struct{ label, bench string }{
	{"floor: encoding/json (case-insensitive: not strict)", "BenchmarkFloor/decoder=encoding-json/entries=%d"},
	{"floor: sigs.k8s.io/json (strict, Kubernetes' decoder)", "BenchmarkFloor/decoder=sigs-k8s-json/entries=%d"},
	{"floor: go-json-experiment/json = encoding/json/v2 (strict)", "BenchmarkFloor/decoder=json-v2/entries=%d"},
	{"floor: json-iterator, CaseSensitive (strict)", "BenchmarkFloor/decoder=jsoniter-casesensitive/entries=%d"},
	{"guard: full path as served (mux, metrics, decode, CA cache, decide, encode)", "BenchmarkGuard/path=server/entries=%d"},
	{"guard: Handler.Review (decode + decide, no HTTP)", "BenchmarkGuard/path=review/entries=%d"},
	{"controller-runtime generic admission.Webhook, same decision", "BenchmarkGeneric/entries=%d"},
	{"CEL: the generated ValidatingAdmissionPolicy in k8s.io/apiserver's validator, compiled once", "BenchmarkCEL/entries=%d"},
	{"Rego: OPA v1.22 prepared query", "BenchmarkRego/entries=%d"},
}

var strictFloors = []string{"sigs-k8s-json", "json-v2", "jsoniter-casesensitive"}

func main() {
	rows, order, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark lines on stdin")
		os.Exit(1)
	}
	runs := 0
	for _, r := range rows {
		runs = max(runs, len(r.samples["ns/op"]))
	}
	fmt.Fprintf(os.Stdout, "Medians of %d rounds; a ratio is the median of the ratios within each round; spread is ±half the range of a row's ns/op over the rounds.\n\n", runs)
	fmt.Fprintln(os.Stdout, "| entries | path | µs/op | KB/op | allocs/op | × encoding/json floor | × fastest strict floor | spread |")
	fmt.Fprintln(os.Stdout, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, n := range []int{5, 50} {
		floor, ok := rows[fmt.Sprintf(paths[0].bench, n)]
		if !ok {
			continue
		}
		floorNs, _ := floor.median("ns/op")
		if mbs, ok := floor.median("MB/s"); ok {
			fmt.Fprintf(os.Stdout, "| %d | *review: %.1f KB of JSON* | | | | | | |\n", n, mbs*floorNs/1e3/1024)
		}
		var fastest *row
		fastestName := ""
		for _, d := range strictFloors {
			if r, ok := rows[fmt.Sprintf("BenchmarkFloor/decoder=%s/entries=%d", d, n)]; ok {
				if fastest == nil || r.ratio(floor) < fastest.ratio(floor) {
					fastest, fastestName = r, d
				}
			}
		}
		for _, p := range paths {
			r, ok := rows[fmt.Sprintf(p.bench, n)]
			if !ok {
				continue
			}
			ns, _ := r.median("ns/op")
			bytes, _ := r.median("B/op")
			allocs, _ := r.median("allocs/op")
			label := p.label
			if strings.Contains(p.bench, fastestName) && fastestName != "" {
				label += " ← fastest strict"
			}
			fmt.Fprintf(os.Stdout, "| %d | %s | %.1f | %.1f | %.0f | %.2f× | %.2f× | ±%.0f%% |\n",
				n, label, ns/1e3, bytes/1024, allocs, r.ratio(floor), r.ratio(fastest), r.spread()/2)
		}
	}

	printAPIServer(rows, order)
	printAPIServerStatic(rows, order)

	var scale []*row
	for _, name := range order {
		if strings.HasPrefix(name, "BenchmarkScale/") {
			scale = append(scale, rows[name])
		}
	}
	if len(scale) == 0 {
		return
	}
	fmt.Fprintln(os.Stdout)
	fmt.Fprintln(os.Stdout, "| scale | µs/op | KB/op | allocs/op | other | × 1 mapping | spread |")
	fmt.Fprintln(os.Stdout, "|---|---:|---:|---:|---|---:|---:|")
	base := map[string]*row{}
	for _, r := range scale {
		if rest, ok := strings.CutPrefix(r.name, "BenchmarkScale/mappings=1/"); ok {
			base[rest] = r
		}
	}
	for _, r := range scale {
		ns, _ := r.median("ns/op")
		bytes, _ := r.median("B/op")
		allocs, _ := r.median("allocs/op")
		var other []string
		for unit := range r.samples {
			if unit != "ns/op" && unit != "B/op" && unit != "allocs/op" && unit != "MB/s" {
				v, _ := r.median(unit)
				other = append(other, fmt.Sprintf("%.1f %s", v, unit))
			}
		}
		slices.Sort(other)
		ratio := "—"
		if b := base[strings.TrimSuffix(strings.TrimPrefix(r.name[strings.LastIndex(r.name, "/"):], "/"), "")]; b != nil {
			ratio = fmt.Sprintf("%.2f×", r.ratio(b))
		} else if strings.Contains(r.name, "decide-by-selector") && base["decide-by-name"] != nil {
			ratio = fmt.Sprintf("%.2f×", r.ratio(base["decide-by-name"]))
		}
		fmt.Fprintf(os.Stdout, "| %s | %.1f | %.1f | %.0f | %s | %s | ±%.0f%% |\n",
			strings.TrimPrefix(r.name, "BenchmarkScale/"), ns/1e3, bytes/1024, allocs, strings.Join(other, ", "), ratio, r.spread()/2)
	}
}

// printAPIServer prints the kube-apiserver benchmark's rows: what its
// ValidatingAdmissionPolicy plugin spent per write under the generated
// policy and under the least policy in the same run, and their ratio (each
// a median over rounds), the ratio to the floor policy for the writes that
// change an entry, and the largest configuration that passed.
func printAPIServer(rows map[string]*row, order []string) {
	printRows(rows, order, "BenchmarkAPIServer/",
		"| kube-apiserver, per write | generated ms | least policy ms | × least | × floor | spread |\n|---|---:|---:|---:|---:|---:|",
		func(rest string, r *row) string {
			if n, ok := r.median("largest-entries"); ok {
				return fmt.Sprintf("| %s: %.0f entries | | | | | |", rest, n)
			}
			gen, least, ratio := againstLeast(r)
			floor := ""
			if f, ok := r.median("x-floor"); ok {
				floor = fmt.Sprintf("%.2f×", f)
			}
			return fmt.Sprintf("| %s | %.2f | %.2f | %.2f× | %s | ±%.0f%% |", rest, gen/1e6, least/1e6, ratio, floor, spreadOf(r.samples["ns/write"])/2)
		})
}

// printAPIServerStatic prints the static shape's rows: what kube-apiserver's
// ValidatingAdmissionWebhook plugin spent per owner write of a
// configuration the static guard covers, what its ValidatingAdmissionPolicy
// plugin spent on the least policy's write in the same run, their ratio
// (each a median over rounds), the ratio to the floor policy for the
// writes that change an entry, and whether kube-apiserver called the guard.
func printAPIServerStatic(rows map[string]*row, order []string) {
	printRows(rows, order, "BenchmarkAPIServerStatic/",
		"| kube-apiserver, static shape, per write | webhook plugin ms | least policy ms | × least | × floor | guard called | spread |\n|---|---:|---:|---:|---:|---|---:|",
		func(rest string, r *row) string {
			took, least, ratio := againstLeast(r)
			floor := ""
			if f, ok := r.median("x-floor"); ok {
				floor = fmt.Sprintf("%.2f×", f)
			}
			called := "no"
			if calls, _ := r.median("guard-calls/write"); calls > 0 {
				called = "yes"
			}
			return fmt.Sprintf("| %s | %.2f | %.2f | %.2f× | %s | %s | ±%.0f%% |", rest, took/1e6, least/1e6, ratio, floor, called, spreadOf(r.samples["ns/write"])/2)
		})
}

// printRows prints header and then line's row for every benchmark whose
// name is prefix followed by rest, in the order they ran; nothing when none
// ran.
func printRows(rows map[string]*row, order []string, prefix, header string, line func(rest string, r *row) string) {
	printed := false
	for _, name := range order {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if !printed {
			fmt.Fprintln(os.Stdout)
			fmt.Fprintln(os.Stdout, header)
			printed = true
		}
		fmt.Fprintln(os.Stdout, line(rest, rows[name]))
	}
}

// againstLeast are a kube-apiserver row's medians: its ns/write, the least
// policy's and their ratio.
func againstLeast(r *row) (took, least, ratio float64) {
	took, _ = r.median("ns/write")
	least, _ = r.median("least-ns/write")
	ratio, _ = r.median("x-least")
	return took, least, ratio
}

// spreadOf is (max-min)/median of s, in percent.
func spreadOf(s []float64) float64 {
	r := &row{samples: map[string][]float64{"ns/op": s}}
	return r.spread()
}
