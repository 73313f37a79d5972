//! The [`Formatter`] trait: how the consumer turns a record into bytes.

/// Turns one record into bytes. Implementations append exactly one
/// formatted record, line terminator included, to `out`, and must not
/// allocate per record beyond `out` growing.
pub trait Formatter<R>: Send + 'static {
    /// Appends `rec`, formatted, to `out`.
    fn format(&mut self, rec: &R, out: &mut Vec<u8>);
}

impl<R, F: Formatter<R> + ?Sized> Formatter<R> for Box<F> {
    fn format(&mut self, rec: &R, out: &mut Vec<u8>) {
        (**self).format(rec, out)
    }
}
