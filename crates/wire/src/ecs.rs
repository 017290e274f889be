//! EDNS Client Subnet (RFC 7871): strict validation of the option in a query
//! (§6, §7.2.1) and the echo with SCOPE PREFIX-LENGTH in the response (§7.2.2).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an ECS option is malformed. Each one is FORMERR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcsError {
    /// Shorter than FAMILY + SOURCE + SCOPE.
    TooShort,
    /// FAMILY is neither 1 (IPv4) nor 2 (IPv6).
    UnknownFamily,
    /// SOURCE longer than the family's address.
    SourceTooLong,
    /// ADDRESS is not exactly ceil(SOURCE/8) octets.
    AddressLength,
    /// ADDRESS has bits set past SOURCE.
    BitsPastSource,
    /// SCOPE must be 0 in a query.
    ScopeInQuery,
    /// Two ECS options in one query.
    Duplicate,
}

/// A validated client subnet from a query: the address is already masked to
/// SOURCE, and the raw ADDRESS octets are kept so the echo is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSubnet {
    family: u16,
    source: u8,
    addr: [u8; 16],
}

/// A SCOPE PREFIX-LENGTH: the block around the client for which an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Scope(u8);

impl Scope {
    /// Scope 0: the answer does not depend on the client's address.
    pub const GLOBAL: Scope = Scope(0);

    /// A scope of `len` bits.
    pub fn new(len: u8) -> Scope {
        Scope(len)
    }

    /// The SCOPE PREFIX-LENGTH.
    pub fn prefix_len(self) -> u8 {
        self.0
    }
}

impl ClientSubnet {
    /// Parse and validate the option body (after OPTION-CODE and OPTION-LENGTH).
    pub fn parse(body: &[u8]) -> Result<ClientSubnet, EcsError> {
        if body.len() < 4 {
            return Err(EcsError::TooShort);
        }
        let family = u16::from_be_bytes([body[0], body[1]]);
        let source = body[2];
        let scope = body[3];
        let max = match family {
            1 => 32,
            2 => 128,
            _ => return Err(EcsError::UnknownFamily),
        };
        if source > max {
            return Err(EcsError::SourceTooLong);
        }
        let addr = &body[4..];
        let want = (source as usize).div_ceil(8);
        if addr.len() != want {
            return Err(EcsError::AddressLength);
        }
        if !source.is_multiple_of(8) {
            let mask = 0xFFu8 >> (source % 8);
            if addr[want - 1] & mask != 0 {
                return Err(EcsError::BitsPastSource);
            }
        }
        if scope != 0 {
            return Err(EcsError::ScopeInQuery);
        }
        let mut a = [0u8; 16];
        a[..want].copy_from_slice(addr);
        Ok(ClientSubnet {
            family,
            source,
            addr: a,
        })
    }

    /// Build one (for tools and tests); the address is masked to `source`.
    pub fn new(addr: IpAddr, source: u8) -> Option<ClientSubnet> {
        let (family, max, bytes) = match addr {
            IpAddr::V4(a) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                (1, 32, b)
            }
            IpAddr::V6(a) => (2, 128, a.octets()),
        };
        if source > max {
            return None;
        }
        let mut b = bytes;
        for (i, byte) in b.iter_mut().enumerate() {
            let bits = (source as usize).saturating_sub(i * 8).min(8);
            *byte &= !(0xFFu8.checked_shr(bits as u32).unwrap_or(0));
        }
        Some(ClientSubnet {
            family,
            source,
            addr: b,
        })
    }

    /// FAMILY: 1 for IPv4, 2 for IPv6.
    pub fn family(&self) -> u16 {
        self.family
    }

    /// SOURCE PREFIX-LENGTH.
    pub fn source(&self) -> u8 {
        self.source
    }

    /// The client address (masked to SOURCE).
    pub fn addr(&self) -> IpAddr {
        if self.family == 1 {
            IpAddr::V4(Ipv4Addr::new(
                self.addr[0],
                self.addr[1],
                self.addr[2],
                self.addr[3],
            ))
        } else {
            IpAddr::V6(Ipv6Addr::from(self.addr))
        }
    }

    /// Octets of ADDRESS as sent.
    pub fn addr_octets(&self) -> &[u8] {
        &self.addr[..(self.source as usize).div_ceil(8)]
    }

    /// Length of the option including its 4-octet header.
    pub fn wire_len(&self) -> usize {
        4 + 4 + self.addr_octets().len()
    }

    /// Write the echo with `scope` (FAMILY, SOURCE and ADDRESS unchanged).
    pub fn write_echo(&self, scope: Scope, out: &mut [u8]) -> usize {
        let a = self.addr_octets();
        let n = self.wire_len();
        out[0..2].copy_from_slice(&8u16.to_be_bytes());
        out[2..4].copy_from_slice(&((n - 4) as u16).to_be_bytes());
        out[4..6].copy_from_slice(&self.family.to_be_bytes());
        out[6] = self.source;
        out[7] = scope.0;
        out[8..n].copy_from_slice(a);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_per_rfc7871_section6() {
        assert!(ClientSubnet::parse(&[0, 1, 24, 0, 8, 8, 8]).is_ok());
        assert_eq!(ClientSubnet::parse(&[0, 1, 24]), Err(EcsError::TooShort));
        assert_eq!(
            ClientSubnet::parse(&[0, 3, 0, 0]),
            Err(EcsError::UnknownFamily)
        );
        assert_eq!(
            ClientSubnet::parse(&[0, 1, 33, 0, 1, 2, 3, 4, 5]),
            Err(EcsError::SourceTooLong)
        );
        assert_eq!(
            ClientSubnet::parse(&[0, 1, 24, 0, 8, 8, 8, 8]),
            Err(EcsError::AddressLength)
        );
        assert_eq!(
            ClientSubnet::parse(&[0, 1, 23, 0, 8, 8, 9]),
            Err(EcsError::BitsPastSource)
        );
        assert_eq!(
            ClientSubnet::parse(&[0, 1, 24, 8, 8, 8, 8]),
            Err(EcsError::ScopeInQuery)
        );
        let c = ClientSubnet::parse(&[0, 1, 0, 0]).unwrap();
        assert_eq!(c.source(), 0);
        assert_eq!(c.addr_octets(), &[] as &[u8]);
    }

    #[test]
    fn new_masks() {
        let c = ClientSubnet::new("8.8.8.8".parse().unwrap(), 20).unwrap();
        assert_eq!(c.addr(), "8.8.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(c.addr_octets(), &[8, 8, 0]);
    }
}
