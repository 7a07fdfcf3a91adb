// Package ruletest evaluates the alerts of the chart's PrometheusRule with
// Prometheus's rule engine (github.com/prometheus/prometheus/rules) over
// series the guard's own collectors export, so that an alert that cannot
// fire (a wrong join, a label the series lacks, a threshold of the wrong
// sign) fails here rather than staying silent in a cluster.
package ruletest
