# The growth curve of `make bench` (section 4) from its TSV, as an SVG:
# log-log curves of one-change commit time (median, and the first 7 commits
# of a fresh process, attached by default and with SHMCFG_ATTACH_PREFAULT),
# LMDB's one-key write transaction at the same number of keys, attach in a
# fresh process (both ways) and lookup by name, and below them the
# segment's bytes per option, against the number of options; the limits of
# issue 12 are the open marks.
#
#   make bench && make bench-plot
#   gnuplot -e "tsv='doc/growth.tsv'; svg='doc/growth.svg'" doc/plot-growth.gp
#
# It reads nothing but the TSV (columns by name, "#" lines are comments; the
# "# title:" line names the run), so a recorded TSV redraws its plot.
# Needs gnuplot 5 (Debian: gnuplot-nox).

if (!exists("tsv")) tsv = "doc/growth.tsv"
if (!exists("svg")) svg = "doc/growth.svg"
run = system("sed -n 's/^# title: //p' '" . tsv . "' | head -n 1")

set terminal svg size 900,1000 dynamic noenhanced font "sans,13" background "white"
set output svg
set encoding utf8
set datafile separator "\t"
set datafile columnheaders
set datafile missing "nan"

set logscale xy
set grid xtics ytics mxtics mytics lc rgb "#dddddd" lw 1, lc rgb "#f0f0f0" lw 1
set xrange [5:2000000]
set xtics ("10" 10, "100" 100, "1k" 1000, "10k" 10000, "100k" 100000, "1M" 1000000)
set xlabel "options in the schema (LMDB: keys)"
set key top left box opaque samplen 3 spacing 1.1 font ",11"

# the limits of issue 12, one mark each (tab-separated with a header, as
# the TSV: columnheaders is set)
$commit_limit << EOD
options	ns
1000	10000
100000	20000
EOD
$attach_limit << EOD
options	ns
100000	5000000
EOD
$memory_limit << EOD
options	bytes
10	26214.4
100000	400
EOD

set multiplot layout 2,1 title "make bench, growth: " . run font ",13"

# --- time per operation, in ns
set ylabel "time per operation"
set yrange [5:5e9]
set ytics ("10 ns" 10, "100 ns" 100, "1 µs" 1e3, "10 µs" 1e4, "100 µs" 1e5, \
           "1 ms" 1e6, "10 ms" 1e7, "100 ms" 1e8, "1 s" 1e9)
plot tsv using "options":"commit_first_ns" with linespoints lw 2 dt 2 pt 9 ps 1.2 lc rgb "#d62728" \
         title "commit, first 7 of a fresh process (median)", \
     tsv using "options":"commit_first_prefault_ns" with linespoints lw 2 dt 3 pt 9 ps 1.0 lc rgb "#ff9896" \
         title "... attached with SHMCFG_ATTACH_PREFAULT", \
     tsv using "options":"commit_ns" with linespoints lw 2 pt 7 ps 1.2 lc rgb "#d62728" \
         title "one-change commit (median)", \
     $commit_limit using 1:2 with points pt 6 ps 2.2 lw 2 lc rgb "#d62728" \
         title "commit limit: 10 µs at 1k, 20 µs at 100k", \
     tsv using "options":"lmdb_write_ns" with linespoints lw 2 pt 5 ps 1.1 lc rgb "#7f7f7f" \
         title "LMDB one-key write txn, same keys (median)", \
     tsv using "options":"attach_ns" with linespoints lw 2 pt 11 ps 1.3 lc rgb "#1f77b4" \
         title "attach in a fresh process (median)", \
     tsv using "options":"attach_prefault_ns" with linespoints lw 2 dt 3 pt 11 ps 1.0 lc rgb "#aec7e8" \
         title "... with SHMCFG_ATTACH_PREFAULT", \
     $attach_limit using 1:2 with points pt 8 ps 2.2 lw 2 lc rgb "#1f77b4" \
         title "attach limit: 5 ms at 100k", \
     tsv using "options":"lookup_ns" with linespoints lw 2 pt 13 ps 1.3 lc rgb "#2ca02c" \
         title "lookup by name (median)"

# --- memory, bytes per option
set ylabel "bytes per option (LMDB: per key)"
set yrange [10:2e5]
set ytics ("10 B" 10, "100 B" 100, "1 KiB" 1024, "10 KiB" 10240, "100 KiB" 102400)
set key top right
plot tsv using "options":"bytes_per_option" with linespoints lw 2 pt 7 ps 1.2 lc rgb "#9467bd" \
         title "segment bytes per option", \
     $memory_limit using 1:2 with points pt 6 ps 2.2 lw 2 lc rgb "#9467bd" \
         title "limit: 256 KiB at 10 options, 400 B at 100k", \
     tsv using "options":(column("lmdb_bytes") / column("options")) with linespoints lw 2 dt 2 pt 5 ps 1 \
         lc rgb "#7f7f7f" title "LMDB file in use, bytes per key"

unset multiplot
