/* GPU usage charts: uPlot (from npm, static/vendor/uplot) drawing the JSON of
 * usage:workload-series. Every element with data-gpu-chart gets one chart; while the workload
 * runs (refresh_seconds in the answer) it is fetched again after each scrape interval. */
(function () {
  "use strict";

  var STARTING = ["submitted", "creating", "pending"];
  var STARTING_RETRY_MS = 5000;

  function gib(mib) { return mib == null ? null : Math.round(mib / 102.4) / 10; }

  function options(width, memoryTotalGiB) {
    return {
      width: width,
      height: 260,
      scales: {
        x: { time: true },
        pct: { range: [0, 100] },
        mem: { range: [0, Math.max(memoryTotalGiB || 1, 1)] },
      },
      series: [
        {},
        { label: "Utilisation, mean %", scale: "pct", stroke: "#1f6feb", width: 2,
          fill: "rgba(31,111,235,0.08)" },
        { label: "Utilisation, peak GPU %", scale: "pct", stroke: "#8250df", width: 1,
          dash: [4, 4] },
        { label: "Memory used per GPU, GiB", scale: "mem", stroke: "#bf8700", width: 2 },
      ],
      axes: [
        {},
        { scale: "pct", label: "%", values: function (u, ticks) { return ticks.map(function (t) { return t + "%"; }); } },
        { scale: "mem", label: "GiB", side: 1, grid: { show: false } },
      ],
    };
  }

  function summary(data) {
    var n = data.t.length;
    if (!n) {
      if (data.state === "running") { return "No GPU samples yet: they arrive with the next scrape."; }
      return STARTING.indexOf(data.state) >= 0 ? "No GPU samples until it runs."
        : "No GPU samples in this range.";
    }
    var last = n - 1;
    var text = "Latest (" + new Date(data.t[last] * 1000).toLocaleTimeString() + "): " +
      data.util_avg[last] + "% mean utilisation over " + data.gpu_count + " GPU" +
      (data.gpu_count === 1 ? "" : "s");
    if (data.memory_used_mib[last] != null) {
      text += ", " + gib(data.memory_used_mib[last]) + " GiB memory used per GPU";
      if (data.memory_total_mib) { text += " of " + gib(data.memory_total_mib); }
    }
    return text + ". Source: " + data.source + ".";
  }

  function GpuChart(el) {
    this.el = el;
    this.url = el.getAttribute("data-url");
    this.section = el.closest("section") || document;
    this.summaryEl = this.section.querySelector("[data-chart-summary]");
    this.range = this.section.querySelector("[data-chart-range]");
    this.plot = null;
    this.timer = null;
    var self = this;
    if (this.range) {
      this.range.addEventListener("change", function () { self.load(); });
    }
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        if (self.plot) { self.plot.setSize({ width: self.width(), height: 260 }); }
      }).observe(el);
    }
    this.load();
  }

  GpuChart.prototype.width = function () {
    return Math.max(this.el.clientWidth || 600, 280);
  };

  GpuChart.prototype.load = function () {
    var self = this;
    clearTimeout(this.timer);
    var minutes = this.range ? this.range.value : "60";
    fetch(this.url + "?minutes=" + encodeURIComponent(minutes), {
      credentials: "same-origin", headers: { Accept: "application/json" },
    }).then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.json();
    }).then(function (data) {
      self.draw(data);
      if (data.refresh_seconds) {
        self.timer = setTimeout(function () { self.load(); }, data.refresh_seconds * 1000);
      } else if (STARTING.indexOf(data.state) >= 0) {
        // not running yet: no samples, but there will be once it runs
        self.timer = setTimeout(function () { self.load(); }, STARTING_RETRY_MS);
      }
    }).catch(function (err) {
      if (self.summaryEl) { self.summaryEl.textContent = "The GPU samples could not be loaded (" + err.message + "); retrying."; }
      self.timer = setTimeout(function () { self.load(); }, 30000);
    });
  };

  GpuChart.prototype.draw = function (data) {
    var memory = data.memory_used_mib.map(gib);
    var series = [data.t, data.util_avg, data.util_max, memory];
    var total = gib(data.memory_total_mib);
    if (this.plot && this.total === total) {
      this.plot.setData(series);
    } else {
      if (this.plot) { this.plot.destroy(); }
      this.total = total;
      this.plot = new window.uPlot(options(this.width(), total), series, this.el);
      var legend = this.el.querySelector("table");
      if (legend) { legend.setAttribute("aria-label", "Chart legend: the values under the cursor"); }
    }
    if (this.summaryEl) { this.summaryEl.textContent = summary(data); }
    var scopeEl = this.section.querySelector("[data-chart-scope]");
    if (scopeEl) { scopeEl.textContent = data.scope_note || ""; scopeEl.hidden = !data.scope_note; }
  };

  /* A project's GPU-hour budget (budgets:chart): cumulative weighted GPU-hours per day of the
   * period, the budget line, the forecast at the current rate. */
  function BudgetChart(el) {
    var section = el.closest("section") || document;
    var summaryEl = section.querySelector("[data-chart-summary]");
    fetch(el.getAttribute("data-url"), { credentials: "same-origin",
                                         headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      }).then(function (data) {
        var budget = data.x.map(function () { return data.budget; });
        var opts = {
          width: Math.max(el.clientWidth || 600, 320), height: 260,
          scales: { x: { time: true } },
          series: [{}, { label: "Used, GPU-hours", stroke: "#1f6feb", width: 2,
                         fill: "rgba(31,111,235,0.08)" },
                   { label: "Forecast", stroke: "#8250df", width: 1, dash: [4, 4] },
                   { label: "Budget", stroke: "#cf222e", width: 1 }],
          axes: [{}, { label: "GPU-hours" }],
        };
        new window.uPlot(opts, [data.x, data.used, data.forecast, budget], el);
        var legend = el.querySelector("table");
        if (legend) { legend.setAttribute("aria-label", "Chart legend: the values under the cursor"); }
        if (summaryEl && data.budget == null) {
          summaryEl.textContent = "No budget is set: the line shows the use alone.";
        }
      }).catch(function (err) {
        if (summaryEl) { summaryEl.textContent = "The chart could not be loaded (" + err.message + ")."; }
      });
  }

  /* A month's report (billing:report): each group's cost as stacked bars of GPUs, CPUs and
   * storage, from the page's own JSON (json_script: no request, nothing inline to run). */
  function ReportChart(el) {
    var source = document.getElementById(el.getAttribute("data-report-chart"));
    if (!source) { return; }
    var data = JSON.parse(source.textContent);
    var n = data.labels.length;
    if (!n) { return; }
    var x = data.labels.map(function (_, i) { return i; });
    var cpuTop = x.map(function (i) { return data.gpu[i] + data.cpu[i]; });
    var top = x.map(function (i) { return cpuTop[i] + data.storage[i]; });
    var bars = window.uPlot.paths.bars({ size: [0.6, 80] });
    var opts = {
      width: Math.max(el.clientWidth || 600, 320), height: 280,
      scales: { x: { time: false, range: [-0.5, n - 0.5] }, y: { range: [0, Math.max.apply(null, top.concat([1])) * 1.1] } },
      // the series drawn last on top: the total first, then CPUs + GPUs, then GPUs alone
      series: [{}, { label: "Storage", stroke: "#bf8700", fill: "#d4a72c", paths: bars, points: { show: false } },
               { label: "CPUs", stroke: "#8250df", fill: "#a475f9", paths: bars, points: { show: false } },
               { label: "GPUs", stroke: "#1f6feb", fill: "#54aeff", paths: bars, points: { show: false } }],
      axes: [{ splits: function () { return x; },
               values: function (u, splits) { return splits.map(function (i) { return data.labels[i] || ""; }); } },
             { label: "Cost, " + data.currency }],
      legend: { live: false },
    };
    new window.uPlot(opts, [x, top, cpuTop, data.gpu], el);
  }

  function start() {
    if (!window.uPlot) { return; }
    document.querySelectorAll("[data-gpu-chart]").forEach(function (el) {
      if (!el.gpuChart) { el.gpuChart = new GpuChart(el); }
    });
    document.querySelectorAll("[data-budget-chart]").forEach(function (el) {
      if (!el.budgetChart) { el.budgetChart = new BudgetChart(el); }
    });
    document.querySelectorAll("[data-report-chart]").forEach(function (el) {
      if (!el.reportChart) { el.reportChart = new ReportChart(el); }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
