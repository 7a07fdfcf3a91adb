package framework

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sample is one series of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics are the samples of one scrape.
type Metrics []Sample

// Sum adds the values of the samples of name whose labels include every
// given label (a nil map matches all).
func (m Metrics) Sum(name string, labels map[string]string) float64 {
	var sum float64
next:
	for _, s := range m {
		if s.Name != name {
			continue
		}
		for k, v := range labels {
			if s.Labels[k] != v {
				continue next
			}
		}
		sum += s.Value
	}
	return sum
}

// Series are the samples of name, for failure messages.
func (m Metrics) Series(name string) string {
	var b strings.Builder
	for _, s := range m {
		if s.Name != name {
			continue
		}
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, 0, len(keys))
		for _, k := range keys {
			pairs = append(pairs, fmt.Sprintf("%s=%q", k, s.Labels[k]))
		}
		fmt.Fprintf(&b, "%s{%s} %g\n", s.Name, strings.Join(pairs, ","), s.Value)
	}
	if b.Len() == 0 {
		return name + ": no samples\n"
	}
	return b.String()
}

// ParseMetrics reads the Prometheus text exposition format (the subset
// client_golang writes: no timestamps needed, label values quoted).
func ParseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		var rest string
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.Name = line[:i]
			rest = line[i+1:]
			for {
				rest = strings.TrimLeft(rest, ", ")
				if strings.HasPrefix(rest, "}") {
					rest = rest[1:]
					break
				}
				eq := strings.IndexByte(rest, '=')
				if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
					return nil, fmt.Errorf("malformed labels in %q", line)
				}
				key := rest[:eq]
				val, n, err := unquoteLabel(rest[eq+1:])
				if err != nil {
					return nil, fmt.Errorf("%w in %q", err, line)
				}
				s.Labels[key] = val
				rest = rest[eq+1+n:]
			}
		} else if i >= 0 {
			s.Name, rest = line[:i], line[i:]
		} else {
			return nil, fmt.Errorf("no value in %q", line)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// unquoteLabel reads a quoted label value at the start of s and returns it
// and the number of bytes consumed.
func unquoteLabel(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unterminated escape")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated label value")
}

// scrapeMetrics reads url (a /metrics endpoint) within 5 s; what names
// its server in failures.
func scrapeMetrics(t testing.TB, what, url string) Metrics {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s metrics: %v", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s metrics: %s", what, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		t.Fatalf("parse %s metrics: %v", what, err)
	}
	return m
}
