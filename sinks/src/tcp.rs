//! Socket helpers the stream sinks (syslog over TCP or a unix stream, the
//! IPFIX exporter over TCP) share to count as written only what the peer
//! acknowledged and to end a connection without delivering its queue.

/// Bytes written to TCP socket `fd` that its peer has not acknowledged
/// yet (`ioctl(SIOCOUTQ)`, Linux `tcp(7)`; libc names it `TIOCOUTQ`), or
/// None if the ioctl fails.
pub(crate) fn unacked_bytes(fd: i32) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (= TIOCOUTQ) writes one int through the valid
    // pointer; the descriptor is open (owned by the caller's connection).
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) };
    (r == 0).then_some(queued.max(0) as u64)
}

/// Makes the coming `close` of socket `fd` abortive (`SO_LINGER` on with
/// a zero timeout, `socket(7)`): TCP discards its send queue and sends a
/// reset instead of delivering the queued bytes. Best effort.
pub(crate) fn set_linger_zero(fd: i32) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) reads `size_of::<linger>()` bytes from a live
    // stack value; the descriptor is open (owned by the caller).
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// True when the peer of stream socket `fd` closed the connection or it
/// failed: readable with a hang-up or error, or `recv(MSG_PEEK)` returns
/// 0. Never blocks.
pub(crate) fn peer_closed(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 {
        return false;
    }
    if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
        return true;
    }
    let mut b = [0u8; 1];
    // SAFETY: recv into a 1-byte stack buffer we own; MSG_PEEK leaves the
    // data queued, MSG_DONTWAIT never blocks.
    let r = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    r == 0
}
