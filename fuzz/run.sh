#!/usr/bin/env bash
# Run the cargo-fuzz targets (docs/fuzzing.md).
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     default: 600 s, every target, one at a time
#   JOBS=2 fuzz/run.sh 300                           two targets at a time
# Each run treats an input taking over 2 s (-timeout=2) or allocating over 1 GiB
# (-rss_limit_mb/-malloc_limit_mb) as a crash. Every crashing input is copied into
# fuzz/regressions/<target>/, which `cargo test -p pcielab --test suite fuzz_regressions::` replays on
# stable. Seeds: the repository's own presets, scenarios and fixtures plus fuzz/seeds/<target>/.
# Needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
all=(spec_toml config_space event_list fio_cmdline fio_jobfile schemata resctrl_tree
     qos_plan_yaml qos_plan_toml scenario state_file qos_workload perf_event sysfs_tree
     model_inputs http_request
     result_json lspci_text lspci_hex undo_file corpus_walk)
targets=("${@:-${all[@]}}")
jobs=${JOBS:-1}
mkdir -p logs

seed() {
    local target=$1 corpus=corpus/$1
    mkdir -p "$corpus"
    [ -d "seeds/$target" ] && cp -n seeds/"$target"/* "$corpus"/ 2>/dev/null || true
    case $target in
        spec_toml) cp -n ../presets/*.toml "$corpus"/ ;;
        scenario) cp -n ../scenarios/*.toml "$corpus"/ ;;
        result_json) cp -n ../crates/pcielab-cli/tests/fixtures/*.json "$corpus"/ 2>/dev/null || true ;;
        lspci_text) cp -n ../fixtures/lspci/linuxhw/*.txt "$corpus"/ ;;
        lspci_hex) find ../fixtures/lspci/pciutils ../fixtures/lspci/qemu -type f ! -name 'README*' -exec cp -n {} "$corpus"/ \; ;;
    esac
    cp -n regressions/"$target"/* "$corpus"/ 2>/dev/null || true
}

run_one() {
    local target=$1
    seed "$target"
    local started=$(date +%s)
    mkdir -p "artifacts/$target"
    # The binary built once above, run directly: later edits to the tree cannot change it.
    nice -n 15 "$bin/$target" "corpus/$target" -artifact_prefix="artifacts/$target/" \
        -max_total_time="$seconds" -timeout=2 -rss_limit_mb=1024 -malloc_limit_mb=1024 \
        -print_final_stats=1 > "logs/$target.log" 2>&1 || true
    local ran=$(( $(date +%s) - started ))
    mkdir -p "regressions/$target"
    local found=0
    for crash in artifacts/"$target"/crash-* artifacts/"$target"/timeout-* artifacts/"$target"/oom-*; do
        [ -e "$crash" ] || continue
        cp "$crash" "regressions/$target/"
        found=$((found + 1))
    done
    local execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$target.log" | grep -o '[0-9]*$' || echo 0)
    echo "$target: ran ${ran}s, ${execs} executions, ${found} crashing inputs (log: fuzz/logs/$target.log)"
}

nice -n 15 cargo +nightly fuzz build -O > logs/build.log 2>&1
bin=$(pwd)/target/x86_64-unknown-linux-gnu/release
# Keep the built binaries apart from later builds while the runs go on.
run_bin=$(mktemp -d)
for target in "${targets[@]}"; do cp "$bin/$target" "$run_bin/"; done
bin=$run_bin
running=0
for target in "${targets[@]}"; do
    run_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait
