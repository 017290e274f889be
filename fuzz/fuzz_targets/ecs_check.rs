//! ECS option parsing (RFC 7871 §6): any body either fails, or gives a
//! subnet whose echo, re-parsed with scope 0, is the same subnet, and which
//! `ClientSubnet::new` rebuilds from its address and SOURCE.

use meridian_wire::ecs::{ClientSubnet, Scope};

pub fn run_one(data: &[u8]) {
    let Ok(c) = ClientSubnet::parse(data) else {
        return;
    };
    assert_eq!(c.wire_len(), 4 + data.len());
    assert_eq!(c.addr_octets(), &data[4..]);
    let mut echo = [0u8; 24];
    let n = c.write_echo(Scope::new(c.source()), &mut echo);
    assert_eq!(n, c.wire_len());
    assert_eq!(u16::from_be_bytes([echo[0], echo[1]]), 8);
    assert_eq!(u16::from_be_bytes([echo[2], echo[3]]) as usize, n - 4);
    let mut body = echo[4..n].to_vec();
    body[3] = 0;
    assert_eq!(ClientSubnet::parse(&body), Ok(c));
    assert_eq!(ClientSubnet::new(c.addr(), c.source()), Some(c));
}
