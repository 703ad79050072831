(: MASTER use case (seed 004, §1.1): per user, a login, one or more searches
   and a logout with no buy in between. :)
for $e in /log/event
group by $uid := $e/@uid
pattern $p tumbling maximal in $e $login $search $logout using
  $login as element(event) pcur $x when $x/@operation eq 'Login'
  $search as element(event)+ pcur $y when $y/@operation eq 'Search'
  $logout as element(event) pcur $z when $z/@operation eq 'Logout'
return <SearchNoBuy uid="{$uid}" searches="{count($search)}"
                    from="{$login/@time}" to="{$logout/@time}"/>
