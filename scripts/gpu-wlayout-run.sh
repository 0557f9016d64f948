#!/bin/bash
# wlayout call 1: relaid TMA tile — bits + GEMM timings
tar xJf .gpu-wlayout/pack.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/p/lib TANDEM_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/device.txt 2>&1
uptime >> $OUT/device.txt
cd /tmp/p
timeout 150 ./test_cuda_kernels --gtest_filter='*RelayWeights*:*GemmRelaid*' > $OUT/test.log 2>&1; echo "rc=$?" >> $OUT/test.log
tail -5 $OUT/test.log
TANDEM_BENCH_LARGE_VARIANTS=5,15,16,17 timeout 200 ./bench_cuda_gemm --large-variants > $OUT/bench.log 2>&1; echo "rc=$?" >> $OUT/bench.log
cat $OUT/bench.log | head -120
