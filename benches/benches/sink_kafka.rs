//! Kafka sink to librdkafka's mock cluster on loopback: 256 KiB batches of
//! text NAT44 lines produced with `KafkaSink::write_batch`, each iteration
//! timed until every record is acknowledged (records/s acknowledged).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use dplog::formatters::TextFormatter;
use dplog::sinks::{KafkaKey, KafkaSink, KafkaSinkOptions};
use dplog::{Formatter, Sink};
use dplog_benches::{criterion_config, mixed_pool};
use rdkafka::mocking::MockCluster;

const BATCH_BYTES: usize = 256 * 1024;
/// Batches per iteration (about 17 000 lines).
const BATCHES: usize = 8;

fn text_batch() -> (Vec<u8>, usize) {
    let pool = mixed_pool(4096);
    let mut f = TextFormatter::default();
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let mut line = Vec::with_capacity(512);
    let mut n = 0;
    for r in pool.iter().cycle() {
        line.clear();
        f.format(r, &mut line);
        if batch.len() + line.len() > BATCH_BYTES {
            break;
        }
        batch.extend_from_slice(&line);
        n += 1;
    }
    (batch, n)
}

fn bench(c: &mut Criterion) {
    let (batch, lines) = text_batch();
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("bench", 4, 1).expect("topic");
    for (name, key, pack) in [
        ("KafkaSink_mock_unkeyed", KafkaKey::None, 1),
        (
            "KafkaSink_mock_keyed_by_inside_address",
            KafkaKey::Field("sourceIPv4Address".into()),
            1,
        ),
        (
            "KafkaSink_mock_unkeyed_16_lines_per_message",
            KafkaKey::None,
            16,
        ),
    ] {
        let mut g = c.benchmark_group("sink_kafka_records");
        g.sampling_mode(SamplingMode::Flat);
        g.throughput(Throughput::Elements((lines * BATCHES) as u64));
        let mut o = KafkaSinkOptions::new(cluster.bootstrap_servers(), "bench");
        o.key = key;
        o.lines_per_message = pack;
        let mut sink = KafkaSink::new(o).expect("kafka sink");
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let t0 = Instant::now();
                for _ in 0..iters {
                    let mut acked = 0u64;
                    for _ in 0..BATCHES {
                        while sink.write_batch(&batch).is_err() {
                            acked += sink.poll().delivered_records;
                        }
                    }
                    while acked < (lines * BATCHES) as u64 {
                        let p = sink.poll();
                        assert_eq!(p.failed_records, 0);
                        acked += p.delivered_records;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
                t0.elapsed()
            })
        });
        sink.close().unwrap();
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = criterion_config(Duration::from_millis(500), Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
