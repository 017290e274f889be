//! `rotate` keeps one order per pool across UDP workers: with `--workers 4`
//! and queries sent one after another from eight sockets (so the kernel's
//! SO_REUSEPORT hash spreads them over the workers), the answers follow the
//! single smooth weighted round robin sequence of the README's example
//! (weights a=5, b=1, c=1: firsts a a b a c a a, repeating), each answer
//! being the whole set rotated to start at that first.

use crate::common::Server;
use crate::pool_common::*;
use hickory_proto::rr::RecordType;

#[test]
fn rotate_follows_one_sequence_across_workers() {
    let s = Server::start(&crate::common::example_config(), &["--workers", "4"]);
    let mut clients: Vec<Client> = (0..8).map(|_| Client::new(&s)).collect();
    let set = ips(&["192.0.2.20", "192.0.2.21", "192.0.2.22"]);
    let firsts = [0, 0, 1, 0, 2, 0, 0];
    for i in 0..700 {
        let a = clients[i % 8].ask("rotate.example.test.", RecordType::A);
        let mut want = set.clone();
        want.rotate_left(firsts[i % 7]);
        assert_eq!(a.addrs, want, "response {i} (from socket {})", i % 8);
    }
}
