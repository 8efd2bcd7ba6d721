//! Which IP addresses a granted request may reach: the ranges that stay
//! refused after DNS unless the user named the destination.
//!
//! A rule such as `*.example.com` says "these public hosts"; it must not
//! let a name that resolves to `127.0.0.1`, a private network or the cloud
//! metadata service reach them (DNS is not under the user's control, and
//! may be the attacker's). So every address a request would connect to is
//! classified here, and a [`SpecialRange`] is reached only when a rule
//! names the host exactly (`localhost:11434`, `127.0.0.1`, `[::1]`,
//! `nas.lan`) — and the metadata endpoints only when a rule names the
//! address itself, since no legitimate name should lead there.
//!
//! Pure functions over plain data, so the ranges are tested without
//! sending a packet.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::net::{HostPattern, NetRule, Scheme};

/// A range of addresses that a wildcard grant does not reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialRange {
    /// A cloud instance metadata endpoint (169.254.169.254,
    /// fd00:ec2::254): credentials live there.
    CloudMetadata,
    /// 127.0.0.0/8, ::1: this machine.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 100.64/10, carrier-grade NAT.
    SharedAddressSpace,
    /// 0.0.0.0/8, ::: on many systems a connection to it reaches this
    /// machine.
    Unspecified,
    /// 224/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240/4 and other addresses that are not meant to be reached.
    Reserved,
}

impl SpecialRange {
    /// A short description, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            SpecialRange::CloudMetadata => "a cloud metadata address",
            SpecialRange::Loopback => "a loopback address",
            SpecialRange::Private => "a private-network address",
            SpecialRange::LinkLocal => "a link-local address",
            SpecialRange::SharedAddressSpace => "a carrier-grade NAT address",
            SpecialRange::Unspecified => "an unspecified address",
            SpecialRange::Multicast => "a multicast address",
            SpecialRange::Broadcast => "the broadcast address",
            SpecialRange::Reserved => "a reserved address",
        }
    }
}

impl fmt::Display for SpecialRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The special range `address` falls in; `None` for an ordinary public
/// address. An IPv4 address embedded in IPv6 (`::ffff:127.0.0.1`) is
/// classified as the IPv4 address it reaches.
pub fn classify(address: IpAddr) -> Option<SpecialRange> {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(address: Ipv4Addr) -> Option<SpecialRange> {
    let [a, b, c, d] = address.octets();
    let range = match (a, b) {
        _ if [a, b, c, d] == [169, 254, 169, 254] => SpecialRange::CloudMetadata,
        (127, _) => SpecialRange::Loopback,
        (10, _) | (192, 168) => SpecialRange::Private,
        (172, 16..=31) => SpecialRange::Private,
        (169, 254) => SpecialRange::LinkLocal,
        (100, 64..=127) => SpecialRange::SharedAddressSpace,
        (0, _) => SpecialRange::Unspecified,
        (224..=239, _) => SpecialRange::Multicast,
        _ if address == Ipv4Addr::BROADCAST => SpecialRange::Broadcast,
        (240..=255, _) => SpecialRange::Reserved,
        _ => return None,
    };
    Some(range)
}

fn classify_v6(address: Ipv6Addr) -> Option<SpecialRange> {
    const AWS_METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    let first = address.segments()[0];
    let range = if address == AWS_METADATA {
        SpecialRange::CloudMetadata
    } else if address.is_loopback() {
        SpecialRange::Loopback
    } else if address.is_unspecified() {
        SpecialRange::Unspecified
    } else if first & 0xfe00 == 0xfc00 {
        SpecialRange::Private
    } else if first & 0xffc0 == 0xfe80 {
        SpecialRange::LinkLocal
    } else if first & 0xff00 == 0xff00 {
        SpecialRange::Multicast
    } else if let Some(v4) = embedded_v4(address) {
        // NAT64 (64:ff9b::/96) and the deprecated IPv4-compatible form
        // reach the IPv4 address inside.
        return classify_v4(v4);
    } else {
        return None;
    };
    Some(range)
}

/// The IPv4 address inside a NAT64 (`64:ff9b::a.b.c.d`) or IPv4-compatible
/// (`::a.b.c.d`) address.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = address.segments();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let compatible = s[..6] == [0, 0, 0, 0, 0, 0];
    (nat64 || compatible).then(|| {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    })
}

/// How the rules of a run grant one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostGrant {
    /// No rule matches: refused before any name is resolved.
    NotGranted,
    /// Only wildcard rules match: public addresses only.
    ByWildcard,
    /// A rule names the host exactly (a name or an address literal): its
    /// special ranges are reachable too, except cloud metadata.
    ByName,
    /// A rule names the host as an IP address literal: whatever that
    /// address is, the user wrote it.
    ByAddress,
}

/// How `rules` grant a request to `scheme://host:port`; `host` as in a URL
/// (IPv6 in brackets or not).
pub fn host_grant(rules: &[NetRule], scheme: Scheme, host: &str, port: u16) -> HostGrant {
    rules
        .iter()
        .filter(|rule| rule.matches(scheme, host, port))
        .map(|rule| match rule.host {
            HostPattern::Subdomains(_) => HostGrant::ByWildcard,
            HostPattern::Name(_) => HostGrant::ByName,
            HostPattern::Ipv4(_) | HostPattern::Ipv6(_) => HostGrant::ByAddress,
        })
        .max_by_key(|grant| match grant {
            HostGrant::NotGranted => 0,
            HostGrant::ByWildcard => 1,
            HostGrant::ByName => 2,
            HostGrant::ByAddress => 3,
        })
        .unwrap_or(HostGrant::NotGranted)
}

/// Why a destination may not connect to an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressRefusal {
    /// No rule grants the destination at all.
    NotGranted,
    /// The address is in a range the grant does not reach.
    Range(SpecialRange),
}

/// Whether a destination granted as `grant` may connect to `address`.
pub fn check_address(grant: HostGrant, address: IpAddr) -> Result<(), AddressRefusal> {
    let range = classify(address);
    let allowed = match (grant, range) {
        (HostGrant::NotGranted, _) => return Err(AddressRefusal::NotGranted),
        (_, None) | (HostGrant::ByAddress, _) => true,
        (HostGrant::ByName, Some(SpecialRange::CloudMetadata)) => false,
        (HostGrant::ByName, Some(_)) => true,
        (HostGrant::ByWildcard, Some(_)) => false,
    };
    match range {
        Some(range) if !allowed => Err(AddressRefusal::Range(range)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Option<SpecialRange> {
        classify(text.parse().unwrap())
    }

    #[test]
    fn every_special_range_is_recognized() {
        use SpecialRange::*;
        let cases = [
            ("169.254.169.254", CloudMetadata),
            ("fd00:ec2::254", CloudMetadata),
            ("127.0.0.1", Loopback),
            ("127.255.0.9", Loopback),
            ("::1", Loopback),
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("169.254.1.1", LinkLocal),
            ("fe80::1", LinkLocal),
            ("100.64.0.1", SharedAddressSpace),
            ("100.127.255.255", SharedAddressSpace),
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("::", Unspecified),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("ff02::1", Multicast),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
            // IPv4 inside IPv6 reaches the IPv4 address.
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:169.254.169.254", CloudMetadata),
            ("::ffff:10.1.2.3", Private),
            ("64:ff9b::7f00:1", Loopback),
            ("::a00:1", Private),
        ];
        for (address, range) in cases {
            assert_eq!(class(address), Some(range), "{address}");
        }
    }

    #[test]
    fn public_addresses_are_ordinary() {
        for address in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert_eq!(class(address), None, "{address}");
        }
    }

    fn rules(texts: &[&str]) -> Vec<NetRule> {
        texts.iter().map(|t| NetRule::parse(t).unwrap()).collect()
    }

    #[test]
    fn the_strongest_matching_rule_decides_how_a_host_is_granted() {
        let rules = rules(&["*.example.com", "api.example.com:443", "127.0.0.1:8080"]);
        let grant = |host: &str, port| host_grant(&rules, Scheme::Https, host, port);
        assert_eq!(grant("a.example.com", 443), HostGrant::ByWildcard);
        assert_eq!(grant("api.example.com", 443), HostGrant::ByName);
        assert_eq!(grant("api.example.com", 8443), HostGrant::ByWildcard);
        assert_eq!(grant("127.0.0.1", 8080), HostGrant::ByAddress);
        assert_eq!(grant("127.0.0.1", 8081), HostGrant::NotGranted);
        assert_eq!(grant("example.invalid", 443), HostGrant::NotGranted);
    }

    #[test]
    fn a_wildcard_reaches_public_addresses_only() {
        for address in ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "fe80::1"] {
            let address = address.parse().unwrap();
            assert!(check_address(HostGrant::ByWildcard, address).is_err());
        }
        assert!(check_address(HostGrant::ByWildcard, "93.184.216.34".parse().unwrap()).is_ok());
    }

    #[test]
    fn a_name_reaches_private_ranges_but_not_metadata() {
        let ok = |a: &str| check_address(HostGrant::ByName, a.parse().unwrap());
        assert!(ok("127.0.0.1").is_ok());
        assert!(ok("::1").is_ok());
        assert!(ok("192.168.1.10").is_ok());
        let metadata = Err(AddressRefusal::Range(SpecialRange::CloudMetadata));
        assert_eq!(ok("169.254.169.254"), metadata);
        assert_eq!(ok("fd00:ec2::254"), metadata);
    }

    #[test]
    fn an_address_literal_reaches_itself_whatever_it_is() {
        let ok = |a: &str| check_address(HostGrant::ByAddress, a.parse().unwrap());
        assert!(ok("169.254.169.254").is_ok());
        assert!(ok("127.0.0.1").is_ok());
    }

    #[test]
    fn nothing_is_reached_without_a_grant() {
        for address in ["1.1.1.1", "127.0.0.1"] {
            assert_eq!(
                check_address(HostGrant::NotGranted, address.parse().unwrap()),
                Err(AddressRefusal::NotGranted)
            );
        }
    }
}
