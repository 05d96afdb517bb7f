//! A type stored as one of its words in a TEXT column, read back through its `parse` (sqlx's
//! `Any` driver: both backends). An unknown word is a decode error naming the type, never a
//! default.

/// `text_column!(Type, "what it is")`: `Type` reads from a TEXT column with `Type::parse(&str) ->
/// Option<Type>`; `Option<Type>` then reads a NULL as `None`.
#[macro_export]
macro_rules! text_column {
    ($ty:ty, $what:literal) => {
        impl ::sqlx::Type<::sqlx::Any> for $ty {
            fn type_info() -> ::sqlx::any::AnyTypeInfo {
                <String as ::sqlx::Type<::sqlx::Any>>::type_info()
            }

            fn compatible(ty: &::sqlx::any::AnyTypeInfo) -> bool {
                <String as ::sqlx::Type<::sqlx::Any>>::compatible(ty)
            }
        }

        impl<'r> ::sqlx::Decode<'r, ::sqlx::Any> for $ty {
            fn decode(value: ::sqlx::any::AnyValueRef<'r>) -> Result<Self, ::sqlx::error::BoxDynError> {
                let word = <String as ::sqlx::Decode<'r, ::sqlx::Any>>::decode(value)?;
                <$ty>::parse(&word).ok_or_else(|| format!("unknown {} `{word}`", $what).into())
            }
        }
    };
}
