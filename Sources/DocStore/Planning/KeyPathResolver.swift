/// Turns key paths of a type into field paths, with the type's probe, remembering each answer.
final class KeyPathResolver<T: Decodable> {
    private let probe: FieldPathProbe<T>?
    private var cache: [AnyKeyPath: FieldPath?] = [:]

    init() { probe = try? FieldPathProbe<T>() }

    /// The field path `keyPath` reads, or `nil` when it is not a stored field (a computed property, `.count`, ...).
    func fieldPath(_ keyPath: AnyKeyPath) -> FieldPath? {
        if let known = cache[keyPath] { return known }
        var found: FieldPath?
        if let probe, let partial = keyPath as? PartialKeyPath<T> { found = (try? probe.path(of: partial)) ?? nil }
        cache.updateValue(found, forKey: keyPath)
        return found
    }
}

extension StoreCore {
    func resolver<T: Document>(for type: T.Type) -> KeyPathResolver<T> {
        if let known = resolvers[ObjectIdentifier(type)] as? KeyPathResolver<T> { return known }
        let made = KeyPathResolver<T>()
        resolvers[ObjectIdentifier(type)] = made
        return made
    }
}
